//! Which replica owns which persona, when `apiary up` runs as several replicas (`--shard I/N`).
//!
//! Rendezvous (highest random weight) hashing: every replica scores each (persona key, shard) pair
//! with the same hash and a persona belongs to the shard with the highest score. Every replica
//! decides alone, from the pack set they all share, and agrees with the others. Going from N to
//! N+1 shards moves only the personas whose new shard wins, about 1/(N+1) of them, all to the new
//! shard; going down moves only the removed shard's personas.
//!
//! The key is the pack id and the persona name (both stable across releases of a pack); the hash
//! is SHA-256, so the assignment is the same on every platform and every build.

use std::fmt;

use sha2::{Digest, Sha256};

/// This replica's place among `count` replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based.
    pub index: u32,
    pub count: u32,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The most shards `--shard` accepts: far more replicas than personas make no sense, and the bound
/// keeps a hostile value from costing a loop of billions per persona.
pub const MAX_SHARDS: u32 = 4096;

impl Shard {
    /// Parses `I/N` (0 <= I < N), or `auto/N`, where I is the ordinal at the end of `hostname`
    /// (a StatefulSet's pod `name-2` is replica 2).
    pub fn parse(text: &str, hostname: Option<&str>) -> Result<Shard, String> {
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not I/N (e.g. 0/3) or auto/N"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("`{count}` in `{text}` is not a number of shards"))?;
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "the number of shards must be 1 to {MAX_SHARDS}, not {count}"
            ));
        }
        let index = match index.trim() {
            "auto" => {
                let host = hostname.unwrap_or_default();
                ordinal(host).ok_or_else(|| {
                    format!(
                        "auto/{count} takes the replica number from the end of the host name (a StatefulSet pod `apiary-2`), but the host name is `{host}`"
                    )
                })?
            }
            i => i
                .parse()
                .map_err(|_| format!("`{i}` in `{text}` is not a shard number"))?,
        };
        if index >= count {
            return Err(format!(
                "shard {index} does not exist among {count} (shards are numbered 0 to {})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether this shard owns the persona `name` of pack `pack_id`.
    pub fn owns(&self, pack_id: &str, name: &str) -> bool {
        owner(pack_id, name, self.count) == self.index
    }
}

/// The shard (of `count`) that owns the persona `name` of pack `pack_id`.
pub fn owner(pack_id: &str, name: &str, count: u32) -> u32 {
    (0..count.max(1))
        .max_by_key(|&shard| score(pack_id, name, shard))
        .unwrap_or(0)
}

/// The weight of (persona, shard): the first 8 bytes of SHA-256 over the length-prefixed parts, so
/// that no two different keys share an input.
fn score(pack_id: &str, name: &str, shard: u32) -> u64 {
    let mut h = Sha256::new();
    for part in [pack_id.as_bytes(), name.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update(shard.to_be_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The number at the end of a StatefulSet pod's host name (`apiary-12` → 12).
pub fn ordinal(hostname: &str) -> Option<u32> {
    let (_, n) = hostname.trim().rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("com.example.pack{}", i % 7), format!("persona{i}")))
            .collect()
    }

    fn owners(keys: &[(String, String)], count: u32) -> Vec<u32> {
        keys.iter().map(|(p, n)| owner(p, n, count)).collect()
    }

    #[test]
    fn parses_index_count_and_the_ordinal_of_a_pod() {
        assert_eq!(Shard::parse("1/3", None), Ok(Shard { index: 1, count: 3 }));
        assert_eq!(
            Shard::parse("auto/4", Some("apiary-3")),
            Ok(Shard { index: 3, count: 4 })
        );
        assert_eq!(
            Shard::parse("auto/1", Some("my-app-0\n")),
            Ok(Shard { index: 0, count: 1 })
        );
        for bad in ["3/3", "1", "a/3", "1/0", "1/x", "-1/3", "0/99999"] {
            assert!(Shard::parse(bad, Some("apiary-0")).is_err(), "{bad}");
        }
        let err = Shard::parse("auto/3", Some("laptop")).unwrap_err();
        assert!(err.contains("`laptop`"), "{err}");
        assert!(Shard::parse("auto/3", Some("apiary-5")).is_err());
        assert_eq!(ordinal("apiary-"), None);
        assert_eq!(ordinal("apiary-1x"), None);
    }

    #[test]
    fn every_persona_has_exactly_one_owner() {
        let keys = keys(300);
        for count in 1..6 {
            for (p, n) in &keys {
                let owning = (0..count)
                    .filter(|&i| Shard { index: i, count }.owns(p, n))
                    .count();
                assert_eq!(owning, 1);
            }
        }
    }

    #[test]
    fn personas_spread_over_the_shards() {
        let keys = keys(3000);
        let owners = owners(&keys, 4);
        for shard in 0..4 {
            let n = owners.iter().filter(|&&o| o == shard).count();
            // 750 expected; a fair hash stays well within ±20%.
            assert!((600..=900).contains(&n), "shard {shard}: {n}");
        }
    }

    #[test]
    fn adding_a_shard_moves_only_personas_to_it_about_one_in_n() {
        let keys = keys(3000);
        for count in 1..8u32 {
            let before = owners(&keys, count);
            let after = owners(&keys, count + 1);
            let moved: Vec<usize> = (0..keys.len()).filter(|&i| before[i] != after[i]).collect();
            // Only to the new shard, and nothing else moved.
            assert!(moved.iter().all(|&i| after[i] == count));
            assert!((0..keys.len()).all(|i| after[i] == count || after[i] == before[i]));
            let expected = keys.len() as f64 / f64::from(count + 1);
            let got = moved.len() as f64;
            assert!(
                (got - expected).abs() < expected * 0.2,
                "{count}→{}: moved {got}, expected about {expected}",
                count + 1
            );
        }
    }

    #[test]
    fn removing_a_shard_moves_only_its_personas() {
        let keys = keys(1000);
        let (four, three) = (owners(&keys, 4), owners(&keys, 3));
        for i in 0..keys.len() {
            if four[i] != 3 {
                assert_eq!(three[i], four[i]);
            }
        }
    }

    #[test]
    fn the_assignment_is_fixed_across_builds() {
        // Replicas of different builds must agree: these values may never change.
        let got: Vec<u32> = (0..8)
            .map(|i| owner("com.example.hello", &format!("p{i}"), 5))
            .collect();
        assert_eq!(got, FIXED);
    }

    const FIXED: [u32; 8] = [4, 1, 1, 4, 2, 1, 2, 3];
}
