//! The load a command line asks for, checked: closed or open loop, and the request and
//! response sizes of the service.

use anyhow::{ensure, Result};
use apps::{usage_bail, usage_ensure, Service};
use rr_load::LoadMode;

use crate::{Args, Pattern};

/// KV key length + op byte + u16 key length: the size of a GET request payload.
pub(crate) const KV_GET_LEN: usize = 3 + 17;

/// The validated load description.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) mode: LoadMode,
    /// Echo payload size or KV value size.
    pub(crate) size: usize,
    pub(crate) req_size: usize,
    pub(crate) resp_size: usize,
}

impl Plan {
    pub(crate) fn new(a: &Args) -> Result<Plan> {
        usage_ensure!((1..=1_000_000).contains(&a.conns), "--conns must be between 1 and 1000000");
        usage_ensure!(!a.duration.is_zero(), "--duration must be positive");
        usage_ensure!(a.max_requests != Some(0), "--max-requests must be at least 1");
        usage_ensure!(!a.connect_timeout.is_zero(), "--connect-timeout must be positive");
        usage_ensure!(
            a.pattern == Pattern::Rr || (a.rate.is_none() && a.depth == 1 && a.threads == 1),
            "--pattern {:?} takes no --rate, --depth or --threads",
            a.pattern
        );
        let mode = match a.rate {
            Some(r) if !(r.is_finite() && r > 0.0) => usage_bail!("--rate must be a positive number, got {r}"),
            Some(rate) => LoadMode::OpenLoop { rate },
            None => {
                usage_ensure!((1..=65536).contains(&a.depth), "--depth must be between 1 and 65536");
                LoadMode::ClosedLoop { depth: a.depth }
            }
        };
        match a.service {
            Service::Echo | Service::TcpEcho => {
                if let Some(r) = a.resp_size.filter(|&r| r != a.req_size) {
                    usage_bail!(
                        "{}: the response is the request, so --resp-size ({r}) must equal --req-size ({})",
                        a.service,
                        a.req_size
                    );
                }
                if a.service == Service::TcpEcho {
                    usage_ensure!(
                        a.req_size >= 1,
                        "tcp-echo: --req-size must be at least 1 (a stream has no empty messages)"
                    );
                }
                usage_ensure!(a.req_size <= a.max_frame, "--req-size {} exceeds --max-frame {}", a.req_size, a.max_frame);
                Ok(Plan { mode, size: a.req_size, req_size: a.req_size, resp_size: a.req_size })
            }
            Service::Kv => {
                let value = a.resp_size.unwrap_or(a.req_size);
                usage_ensure!(a.kv_keys >= 1, "--kv-keys must be at least 1");
                usage_ensure!(
                    value < a.max_frame && KV_GET_LEN + value <= a.max_frame,
                    "kv value size {value} does not fit --max-frame {}",
                    a.max_frame
                );
                Ok(Plan { mode, size: value, req_size: KV_GET_LEN, resp_size: 1 + value })
            }
            Service::Resp => {
                // Alternating SET and GET of one value size: the sizes reported are the value's.
                let value = a.resp_size.unwrap_or(a.req_size);
                ensure!(a.kv_keys >= 1, "--kv-keys must be at least 1");
                ensure!(value <= a.max_frame, "resp value size {value} exceeds --max-frame {}", a.max_frame);
                Ok(Plan { mode, size: value, req_size: value, resp_size: value })
            }
        }
    }
}
