//! The provider crate's integration tests, one binary: every vector through the engine
//! (`packs`, `vectors`), the listing facts (`listing`), the freshness and item bounds
//! (`bounds`) and the sign → verify properties (`roundtrip_props`).

mod bounds;
mod expectations;
mod listing;
mod packs;
mod roundtrip_props;
mod support;
mod vectors;
