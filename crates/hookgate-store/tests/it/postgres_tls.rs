//! PostgreSQL over TLS: every `sslmode` against a real cluster started with `ssl = on` and a
//! certificate made here (signed by a CA made here, valid for `localhost` only), and against a
//! cluster without TLS. Whether a connection is encrypted is read from the server's own
//! `pg_stat_ssl`, not inferred from the client.

use hookgate_store::postgres::{PostgresOptions, PostgresStore, SslMode};
use hookgate_store::{InboxStore, StoreError};
use hookgate_testkit::{PgCluster, ServerTls};

struct Pki {
    ca_pem: String,
    server: ServerTls,
}

/// A CA and a server certificate it signs for `names`.
fn pki(names: &[&str]) -> Pki {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "hookgate test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let server_params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server = server_params.signed_by(&server_key, &ca, &ca_key).unwrap();
    Pki {
        ca_pem: ca.pem(),
        server: ServerTls {
            cert_pem: server.pem(),
            key_pem: server_key.serialize_pem(),
        },
    }
}

/// The store's URL for `cluster`'s `postgres` database at `host`, with `params`.
fn url(cluster: &PgCluster, host: &str, params: &str) -> String {
    let mut url = format!("postgres://postgres@{host}:{}/postgres", cluster.port());
    if !params.is_empty() {
        url.push('?');
        url.push_str(params);
    }
    url
}

/// Connects a store (which runs its migrations over the connection) and answers whether the
/// server sees that connection encrypted.
async fn connect_and_check(url: &str) -> Result<bool, StoreError> {
    let store = PostgresStore::connect(url, PostgresOptions::default()).await?;
    store.ping().await?;
    let encrypted = store_connections_encrypted(url).await;
    store.close().await;
    Ok(encrypted)
}

/// Whether every connection named `hookgate` (the store's application name) is encrypted,
/// asked over a plain connection of the test's own.
async fn store_connections_encrypted(store_url: &str) -> bool {
    let port = store_url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap()
        .to_owned();
    let admin = format!(
        "postgres://postgres@127.0.0.1:{port}/postgres?sslmode=disable&application_name=tls-test"
    );
    let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_ssl s \
             JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'hookgate'",
            &[],
        )
        .await
        .unwrap();
    let (all, encrypted): (i64, i64) = (row.get(0), row.get(1));
    assert!(all > 0, "the store has no open connection to look at");
    assert!(
        encrypted == 0 || encrypted == all,
        "{encrypted} of {all} connections encrypted"
    );
    encrypted == all
}

fn assert_refused(result: Result<bool, StoreError>, mode: &str, why: &str) {
    match result {
        Err(StoreError::Unavailable(message)) => {
            eprintln!("{mode} refused as expected: {message}");
            assert!(
                message.to_lowercase().contains(why),
                "{mode}: expected {why:?} in {message:?}"
            );
        }
        other => panic!("{mode} should have been refused ({why}), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sslmode_against_a_server_with_tls() {
    let pki = pki(&["localhost"]);
    let other_ca = self::pki(&["localhost"]);
    let cluster = hookgate_testkit::throwaway_cluster_with_tls(&pki.server);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let wrong_ca = dir.path().join("other-ca.pem");
    std::fs::write(&wrong_ca, &other_ca.ca_pem).unwrap();
    let ca = ca.display().to_string();
    let wrong_ca = wrong_ca.display().to_string();

    // disable: plain text although the server offers TLS.
    let plain = connect_and_check(&url(&cluster, "127.0.0.1", "sslmode=disable")).await;
    assert!(!plain.unwrap(), "sslmode=disable must not encrypt");
    // prefer (explicit, and the loopback default): encrypted, certificate not checked.
    assert!(
        connect_and_check(&url(&cluster, "127.0.0.1", "sslmode=prefer"))
            .await
            .unwrap()
    );
    assert!(
        connect_and_check(&url(&cluster, "127.0.0.1", ""))
            .await
            .unwrap()
    );
    // require: encrypted although nothing could verify the certificate (no root given,
    // and 127.0.0.1 is not a name in it).
    assert!(
        connect_and_check(&url(&cluster, "127.0.0.1", "sslmode=require"))
            .await
            .unwrap()
    );
    // verify-ca: the chain is checked, the host name is not.
    let verify_ca = format!("sslmode=verify-ca&sslrootcert={ca}");
    assert!(
        connect_and_check(&url(&cluster, "127.0.0.1", &verify_ca))
            .await
            .unwrap()
    );
    // verify-full: chain and host name.
    let verify_full = format!("sslmode=verify-full&sslrootcert={ca}");
    assert!(
        connect_and_check(&url(&cluster, "localhost", &verify_full))
            .await
            .unwrap()
    );
    // The key=value form says the same.
    let key_value = format!(
        "host=localhost port={} user=postgres dbname=postgres sslmode=verify-full sslrootcert={ca}",
        cluster.port()
    );
    let store = PostgresStore::connect(&key_value, PostgresOptions::default())
        .await
        .unwrap();
    store.close().await;

    // verify-full refuses a certificate that does not name the host connected to.
    assert_refused(
        connect_and_check(&url(&cluster, "127.0.0.1", &verify_full)).await,
        "verify-full with the wrong host name",
        "certificate",
    );
    // verify-ca and verify-full refuse a certificate from another CA.
    for mode in ["verify-ca", "verify-full"] {
        let params = format!("sslmode={mode}&sslrootcert={wrong_ca}");
        assert_refused(
            connect_and_check(&url(&cluster, "localhost", &params)).await,
            &format!("{mode} with the wrong CA"),
            "certificate",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tls() {
    let cluster = hookgate_testkit::throwaway_cluster();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pki(&["localhost"]).ca_pem).unwrap();
    let ca = ca.display().to_string();

    // prefer falls back to plain text, as in libpq.
    assert!(
        !connect_and_check(&url(&cluster, "127.0.0.1", "sslmode=prefer"))
            .await
            .unwrap()
    );
    // require and the verifying modes never fall back.
    assert_refused(
        connect_and_check(&url(&cluster, "127.0.0.1", "sslmode=require")).await,
        "require against a server without TLS",
        "tls",
    );
    assert_refused(
        connect_and_check(&url(
            &cluster,
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ))
        .await,
        "verify-full against a server without TLS",
        "tls",
    );
}

#[tokio::test]
async fn verifying_modes_need_a_root_certificate() {
    for url in [
        "postgres://postgres@db.example.internal/hooks",
        "postgres://postgres@127.0.0.1/hooks?sslmode=verify-ca",
        "postgres://postgres@127.0.0.1/hooks?sslmode=verify-full",
    ] {
        let err = PostgresStore::connect(url, PostgresOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::Config(m) if m.contains("sslrootcert")),
            "{url}: {err:?}"
        );
    }
    let settings =
        PostgresStore::tls_settings("postgres://u@db.example.internal/h?sslrootcert=system")
            .unwrap();
    assert_eq!(settings.mode, SslMode::VerifyFull);
    assert!(
        PostgresStore::tls_settings("postgres://u@127.0.0.1/h?sslmode=allow").is_err(),
        "allow (plain text first) is refused"
    );
}
