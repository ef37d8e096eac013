//! Test support for hookgate (never published, never linked into the binary).
//!
//! PostgreSQL for tests, found in this order:
//!
//! 1. `DATABASE_URL` when set (any server the test may create databases on);
//! 2. otherwise a throwaway cluster started once per test process with `initdb`/`pg_ctl`
//!    from `PATH` or `/usr/lib/postgresql/*/bin`, in a temp dir, on a free port, listening on
//!    127.0.0.1 only, trust auth. As root, the tools run as the `postgres` user via `runuser`.
//!    A detached watchdog shell stops the cluster and removes its directory once the test
//!    process has gone (statics are never dropped, so this cannot be a `Drop`).
//!
//! If neither works, [`postgres`] panics with how to get PostgreSQL: tests never skip silently.
//!
//! Every [`postgres`] call creates a fresh database with a unique name (dropped again when the
//! [`PgTestDb`] is dropped). Tests that stop or break the server use [`throwaway_cluster`],
//! which always starts a cluster of their own, never the shared one or `DATABASE_URL`.
//!
//! [`vectors`] reads the provider vector files of `testdata/vectors/` (the one loader the
//! provider crate's and the binary's tests share).

pub mod vectors;

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HOW_TO_GET_POSTGRES: &str = "PostgreSQL is needed for these tests: set DATABASE_URL to a \
    server where the tests may create databases (e.g. postgres://postgres@127.0.0.1:5432/postgres), \
    or install PostgreSQL's server binaries (initdb, pg_ctl) on PATH or under \
    /usr/lib/postgresql/*/bin — on Debian: `scripts/ensure-postgres.sh` or \
    `apt-get install -y postgresql`";

/// A fresh, empty database for one test. Dropped (`DROP DATABASE … WITH (FORCE)`) on drop.
#[derive(Debug)]
pub struct PgTestDb {
    url: String,
    name: String,
    admin_url: String,
}

impl PgTestDb {
    /// Connection URL of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PgTestDb {
    fn drop(&mut self) {
        let admin = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        // Own thread and runtime: this may run inside (or outside) a test's runtime.
        let handle = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let connect = tokio_postgres::connect(&admin, tokio_postgres::NoTls);
                if let Ok(Ok((client, conn))) =
                    tokio::time::timeout(Duration::from_secs(5), connect).await
                {
                    tokio::spawn(conn);
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), client.batch_execute(&sql))
                            .await;
                }
            });
        });
        let _ = handle.join();
    }
}

/// A fresh database on `DATABASE_URL` or on this process's shared throwaway cluster.
///
/// # Panics
/// When no PostgreSQL can be found or started, with a message saying how to get one.
pub async fn postgres() -> PgTestDb {
    let admin_url = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => shared_cluster_url(),
    };
    let name = unique_name("hookgate_test");
    let (client, conn) = match tokio::time::timeout(
        Duration::from_secs(10),
        tokio_postgres::connect(&admin_url, tokio_postgres::NoTls),
    )
    .await
    {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => panic!(
            "cannot connect to PostgreSQL at {}: {e}\n{HOW_TO_GET_POSTGRES}",
            redact(&admin_url)
        ),
        Err(_) => panic!(
            "connecting to PostgreSQL at {} timed out\n{HOW_TO_GET_POSTGRES}",
            redact(&admin_url)
        ),
    };
    let conn = tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name} failed: {e}"));
    drop(client);
    let _ = conn.await;
    PgTestDb {
        url: with_database(&admin_url, &name),
        name,
        admin_url,
    }
}

/// A PostgreSQL cluster of this test's own: started now, stopped and deleted on drop (or by its
/// watchdog when the process dies). For tests that stop or break the database.
#[derive(Debug)]
pub struct PgCluster {
    tools: Tools,
    dir: PathBuf,
    port: u16,
    watchdog: Option<Child>,
}

/// Starts a cluster of this test's own (never `DATABASE_URL`, never the shared cluster).
///
/// # Panics
/// When PostgreSQL's server binaries cannot be found or the cluster cannot start.
pub fn throwaway_cluster() -> PgCluster {
    match PgCluster::start_new() {
        Ok(c) => c,
        Err(e) => panic!("cannot start a throwaway PostgreSQL cluster: {e}\n{HOW_TO_GET_POSTGRES}"),
    }
}

impl PgCluster {
    /// URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// URL of database `db` on this cluster.
    pub fn url_for(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Creates a database on this cluster and returns its URL.
    ///
    /// # Panics
    /// When the database cannot be created.
    pub async fn create_database(&self, name: &str) -> String {
        let (client, conn) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to throwaway cluster: {e}"));
        let conn = tokio::spawn(conn);
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        drop(client);
        let _ = conn.await;
        self.url_for(name)
    }

    /// Stops the server (fast shutdown: open connections are terminated) and waits for it.
    ///
    /// # Panics
    /// When `pg_ctl stop` fails.
    pub fn stop(&self) {
        let out = self
            .tools
            .pg_ctl(&self.data_dir())
            .args(["stop", "-w", "-t", "30", "-m", "fast"])
            .output()
            .expect("run pg_ctl stop");
        assert!(
            out.status.success(),
            "pg_ctl stop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server again (same port, same data) and waits until it accepts connections.
    ///
    /// # Panics
    /// When `pg_ctl start` fails.
    pub fn start(&self) {
        if let Err(e) = self.pg_ctl_start() {
            panic!("{e}");
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let log = self.dir.join("server.log");
        let out = self
            .tools
            .pg_ctl(&self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "30", "start"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run pg_ctl start: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            let server_log = std::fs::read_to_string(&log).unwrap_or_default();
            Err(format!(
                "pg_ctl start failed: {}{}\nserver log:\n{server_log}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn start_new() -> Result<PgCluster, String> {
        let tools = Tools::find()?;
        let dir = std::env::temp_dir().join(unique_name("hookgate-pg"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let mut cluster = PgCluster {
            tools,
            dir,
            port: 0,
            watchdog: None,
        };
        // From here on, Drop (or the watchdog) cleans up whatever was made.
        cluster.watchdog = Some(cluster.spawn_watchdog()?);
        if cluster.tools.as_postgres_user {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&cluster.dir))?;
        }
        let mut initdb = cluster.tools.command(&cluster.tools.initdb);
        initdb.arg("-D").arg(cluster.data_dir()).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]);
        run(&mut initdb)?;
        let mut last_err = String::new();
        for _ in 0..5 {
            cluster.port = free_port()?;
            let conf = format!(
                "\n# hookgate-testkit\nlisten_addresses = '127.0.0.1'\nport = {}\n\
                 unix_socket_directories = '{}'\nmax_connections = 200\nshared_buffers = '32MB'\n",
                cluster.port,
                cluster.dir.display()
            );
            append(&cluster.data_dir().join("postgresql.conf"), &conf)?;
            match cluster.pg_ctl_start() {
                Ok(()) => return Ok(cluster),
                Err(e) => last_err = e,
            }
        }
        Err(last_err)
    }

    /// `sh` loop that outlives nothing: once the test process is gone, stop the server and
    /// remove the directory. Its own process group, so a Ctrl-C of the tests does not kill it.
    fn spawn_watchdog(&self) -> Result<Child, String> {
        let prefix = if self.tools.as_postgres_user {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {prefix}'{pg_ctl}' -D '{data}' stop -m immediate >/dev/null 2>&1; rm -rf '{dir}'",
            pid = std::process::id(),
            pg_ctl = self.tools.pg_ctl.display(),
            data = self.data_dir().display(),
            dir = self.dir.display(),
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("spawn watchdog: {e}"))
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.data_dir().join("postmaster.pid").exists() {
            let _ = self
                .tools
                .pg_ctl(&self.data_dir())
                .args(["stop", "-w", "-t", "30", "-m", "immediate"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// The shared cluster of this test process, started on first use, never dropped (its
/// watchdog stops it when the process ends).
fn shared_cluster_url() -> String {
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    let res = SHARED.get_or_init(|| {
        let cluster = PgCluster::start_new()?;
        let url = cluster.url();
        // Keep it running for the life of the process; the watchdog cleans up afterwards.
        std::mem::forget(cluster);
        Ok(url)
    });
    match res {
        Ok(url) => url.clone(),
        Err(e) => panic!(
            "DATABASE_URL is not set and no throwaway PostgreSQL cluster could be started: {e}\n\
             {HOW_TO_GET_POSTGRES}"
        ),
    }
}

#[derive(Debug, Clone)]
struct Tools {
    initdb: PathBuf,
    pg_ctl: PathBuf,
    /// Running as root: PostgreSQL refuses to, so run the tools as `postgres` via `runuser`.
    as_postgres_user: bool,
}

impl Tools {
    fn find() -> Result<Tools, String> {
        let bin = find_bin_dir().ok_or_else(|| {
            "initdb/pg_ctl found neither on PATH nor under /usr/lib/postgresql/*/bin".to_owned()
        })?;
        let as_postgres_user = std::fs::metadata("/proc/self")
            .map(|m| m.uid() == 0)
            .unwrap_or(false);
        if as_postgres_user {
            let ok = Command::new("id")
                .args(["-u", "postgres"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                return Err(
                    "running as root but there is no `postgres` user to run the server as"
                        .to_owned(),
                );
            }
        }
        Ok(Tools {
            initdb: bin.join("initdb"),
            pg_ctl: bin.join("pg_ctl"),
            as_postgres_user,
        })
    }

    fn command(&self, program: &Path) -> Command {
        if self.as_postgres_user {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn pg_ctl(&self, data: &Path) -> Command {
        let mut c = self.command(&self.pg_ctl);
        c.arg("-D").arg(data);
        c
    }
}

fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_both(&dir) {
                return Some(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_both(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| format!("open {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("write {}: {e}", path.display()))
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("find a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("find a free port: {e}"))
}

fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{:x}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `base` with its database replaced by `db` (URL form or `key=value` form).
fn with_database(base: &str, db: &str) -> String {
    if let Some((scheme, rest)) = base.split_once("://") {
        let (before_query, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let authority = before_query
            .split_once('/')
            .map_or(before_query, |(a, _)| a);
        let mut url = format!("{scheme}://{authority}/{db}");
        if let Some(q) = query {
            url.push('?');
            url.push_str(q);
        }
        url
    } else {
        format!("{base} dbname={db}")
    }
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.find('@')) {
        (Some((scheme, rest)), Some(_)) => match rest.split_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or("");
                format!("{scheme}://{user}@{host}")
            }
            None => url.to_owned(),
        },
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database() {
        assert_eq!(
            with_database("postgres://u:p@h:5/db?x=1", "t"),
            "postgres://u:p@h:5/t?x=1"
        );
        assert_eq!(with_database("postgres://u@h", "t"), "postgres://u@h/t");
        assert_eq!(
            with_database("host=h user=u", "t"),
            "host=h user=u dbname=t"
        );
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u@h/db");
    }
}
