//! A Blossom blob server for pack archives: blobs addressed by their SHA-256, uploaded with
//! `PUT /upload` under an authorisation event the uploader signed (BUD-01 kind 24242, `t` =
//! `upload`, an `x` tag naming the blob, an expiration), served with `GET`/`HEAD /<sha256>`.
//! Each blob and the whole store are capped ([`Caps`]); a body longer than it said, or whose digest
//! is not the one authorised, is refused and nothing is kept.
//!
//! [`serve_connection`] answers one HTTP/1.1 connection; the embedded relay hands it every
//! request on its port that is neither a websocket upgrade nor a NIP-11 query.

mod auth;
mod http;
mod store;

pub use auth::{Refusal, check_upload};
pub use http::serve_connection;
pub use store::{BlobStore, Caps, Descriptor, StoreError};

/// A blob server: its store and the URL blobs are served at (`<public_url>/<sha256>`).
#[derive(Debug)]
pub struct BlobServer {
    pub store: BlobStore,
    pub public_url: String,
}
