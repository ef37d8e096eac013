//! The provider crate's integration tests, one binary: every vector through the engine
//! (`packs`, `vectors`), the listing facts (`listing`), the freshness and item bounds
//! (`bounds`), the sign → verify properties (`roundtrip_props`) and signatures in a query
//! parameter (`query_signatures`).

mod bounds;
mod engine_extensions;
mod expectations;
mod key_id_entries;
mod keyed_hashes;
mod listing;
mod packs;
mod query_signatures;
mod roundtrip_props;
mod support;
mod vectors;
