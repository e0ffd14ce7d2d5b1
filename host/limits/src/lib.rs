//! The two limits apiary applies everywhere, as plain values with the clock passed in (so the
//! decisions are tested with instants, never with sleeps):
//! - [`Bucket`]: a token bucket (the relay's publishes per key and per connection, a persona's
//!   turns per author and per channel);
//! - [`Breaker`]: a circuit breaker (a sandboxed component that keeps failing, an agent that keeps
//!   crashing).

mod breaker;
mod bucket;

pub use breaker::{Breaker, BreakerPolicy, Open};
pub use bucket::{Bucket, Buckets, Rate};
