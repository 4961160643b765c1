//! The memory bound of the stack's server: what its configuration lets it allocate.

use anyhow::Result;
use clap::Parser;
use serde::Serialize;
use stack::xsk::EngineConfig;

/// Binary, libraries, heap metadata, socket-set vectors and hash maps: everything that is not
/// socket buffers or UMEM, generously.
const FIXED_ALLOWANCE: u64 = 128 << 20;

/// The stack's resident memory cannot exceed what its configuration lets it allocate: socket
/// buffers of every socket it may hold at once, the UMEM, and a fixed allowance.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct MemoryBound {
    per_socket_bytes: u64,
    pub(crate) max_conns: u64,
    buckets: u64,
    listeners: u64,
    pub(crate) half_open_limit: u64,
    pool_max: u64,
    umem_bytes: u64,
    fixed_bytes: u64,
    /// All sockets at once, UMEM and the allowance.
    pub(crate) total_bytes: u64,
    /// What a flood may add on top of the established connections: half-open sockets and
    /// the spare pool they are recycled into.
    pub(crate) flood_growth_bytes: u64,
    /// Half-open sockets the stack can hold: its limit, which it never passes.
    pub(crate) half_open_max: u64,
    /// Buffers of a socket that carried nothing much (both ways).
    #[serde(skip)]
    initial_bytes: u64,
}

/// rr-server's AF_XDP options as a command line of their own, to build the configuration an
/// xsk rr-server runs with the way rr-server does.
#[derive(Parser)]
struct ServerXskOpts {
    #[command(flatten)]
    pub(crate) xsk: apps::XskOpts,
}

impl MemoryBound {
    /// The bound of an xsk rr-server started with `--max-conns max_conns --buffer buffer`
    /// (its defaults otherwise): its engine's own sizing and its UMEM.
    pub(crate) fn of_server(max_conns: usize, buffer: usize) -> Result<MemoryBound> {
        // Any interface name: building the configuration does not open the device.
        let argv = ["rr-server", "--iface", "flood-bench", "--buffer", &buffer.to_string()];
        let cfg = ServerXskOpts::try_parse_from(argv)?.xsk.config(max_conns, None)?;
        let umem = &cfg.port.umem;
        Ok(MemoryBound::new(&cfg.engine, u64::from(umem.frame_count) * u64::from(umem.frame_size)))
    }

    pub(crate) fn new(engine: &EngineConfig, umem_bytes: u64) -> MemoryBound {
        // Listeners, half-open and pooled sockets hold their initial buffers, established ones
        // grow up to the maximum each way only when they carry more.
        let per_socket = (engine.rx_buffer + engine.tx_buffer) as u64;
        let (rx, tx) = engine.initial_buffers();
        let initial = (rx + tx) as u64;
        let max_conns = engine.max_conns as u64;
        let buckets = engine.bucket_count() as u64;
        let listeners = (engine.listeners_per_bucket() * engine.bucket_count()) as u64;
        let half_open_limit = engine.half_open_limit() as u64;
        let half_open_max = half_open_limit;
        let pool_max = engine.pool_max() as u64;
        let small = listeners + half_open_max + pool_max;
        MemoryBound {
            per_socket_bytes: per_socket,
            max_conns,
            buckets,
            listeners,
            half_open_limit,
            pool_max,
            umem_bytes,
            fixed_bytes: FIXED_ALLOWANCE,
            total_bytes: max_conns * per_socket + small * initial + umem_bytes + FIXED_ALLOWANCE,
            flood_growth_bytes: (half_open_max + pool_max) * initial,
            half_open_max,
            initial_bytes: initial,
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!(
            "memory bound (xsk): ({} connections + {} listeners + {} half-open (the limit; {} buckets) + {} pooled) \
             sockets, established ones up to {} KiB of buffers, the others at {} KiB + UMEM {} MiB + {} MiB fixed = {} MiB; \
             a flood may add at most {} MiB (half-open + pool)",
            self.max_conns,
            self.listeners,
            self.half_open_max,
            self.buckets,
            self.pool_max,
            self.per_socket_bytes >> 10,
            self.initial_bytes >> 10,
            self.umem_bytes >> 20,
            self.fixed_bytes >> 20,
            self.total_bytes >> 20,
            self.flood_growth_bytes >> 20,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_follows_the_config() {
        let b = MemoryBound::of_server(30_000, 64 * 1024).unwrap();
        assert_eq!(b.buckets, 4096);
        assert_eq!(b.listeners, 4096);
        // 64 MiB / 8 KiB (their initial buffers) = 8,192 half-open sockets.
        assert_eq!(b.half_open_limit, 8192);
        assert_eq!(b.half_open_max, 8192);
        assert_eq!(b.umem_bytes, (4 * 16384 + 256) * 4096);
        let small = MemoryBound::of_server(1024, 64 * 1024).unwrap();
        // Half the connection limit: 512.
        assert_eq!(small.half_open_limit, 512);
        assert!(small.total_bytes < b.total_bytes);
    }
}
