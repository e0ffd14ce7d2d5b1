//! The embedded relay: `nostr-relay-builder`'s `LocalRelay` on 127.0.0.1, for `apiary up` without
//! `--relay`. Events are kept in memory for the life of the process (the library's default store).
//! TODO(issue 5): persist under the data dir (the 0.44 line's on-disk stores pull in LMDB).

use std::net::SocketAddr;

use nostr_relay_builder::prelude::*;

pub struct Embedded {
    relay: LocalRelay,
    pub url: String,
}

impl Embedded {
    /// Starts listening on `addr` (port 0 picks a free port).
    pub async fn start(addr: SocketAddr) -> anyhow::Result<Embedded> {
        let mut builder = RelayBuilder::default().addr(addr.ip());
        if addr.port() != 0 {
            builder = builder.port(addr.port());
        }
        let relay = LocalRelay::new(builder);
        relay
            .run()
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the embedded relay on {addr}: {e}"))?;
        let url = relay.url().await.to_string();
        let url = url.trim_end_matches('/').to_string();
        Ok(Embedded { relay, url })
    }

    pub fn shutdown(&self) {
        self.relay.shutdown();
    }
}
