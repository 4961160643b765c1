//! An axum server on either backend; HTTP/1.1 and h2c (HTTP/2 with prior knowledge).
//!
//! ```text
//! cargo run -p stack --features axum --example axum_server -- kernel 8080
//! sudo target/debug/examples/axum_server xsk eth1 198.18.0.100/24 8080   # AF_XDP (root)
//! curl http://198.18.0.100:8080/
//! curl --data-binary @file http://198.18.0.100:8080/echo
//! curl --http2-prior-knowledge http://198.18.0.100:8080/
//! ```
//!
//! `GET /` answers a short body, `POST /echo` streams the request body back, `GET /slow`
//! answers after 1 s (for watching a graceful shutdown finish it). SIGINT or SIGTERM stop
//! accepting, let the requests in flight finish, and exit.
//!
//! Next to axum's own hello-world only the listener differs: `net.listen(port)` instead of
//! `tokio::net::TcpListener::bind(...)`. `axum_server tokio PORT` runs the very same server
//! on tokio's own listener (kernel TCP without the adapter), to compare against.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::routing::{get, post};
use axum::Router;

/// Errors are printed with Display: their text says what to do (Debug, what `main` returning
/// a `Result` prints, hides it in a struct dump).
#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match try_main().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_server: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let app = Router::new()
        .route("/", get(|| async { "Hello, World!\n" }))
        // The request body is the response body: hyper streams it through, so a large upload
        // needs no more memory than the connection's buffers.
        .route("/echo", post(|body: Body| async { body }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                "slow\n"
            }),
        );

    // For comparison, `axum_server tokio PORT` serves through tokio's own listener, as
    // axum's examples do: `let listener = tokio::net::TcpListener::bind(addr).await?;`.
    if let Some(port) = common::tokio_port() {
        let listener = tokio::net::TcpListener::bind(("0.0.0.0", port)).await?;
        println!("axum on http://{} (tokio), Ctrl-C stops", listener.local_addr()?);
        axum::serve(listener, app).with_graceful_shutdown(common::shutdown_signal()).await?;
        println!("stopped");
        return Ok(());
    }

    let (net, port) = common::net_from_args("axum_server", 8080)?;
    let listener = net.listen(port)?;
    println!("axum on http://{} ({}), Ctrl-C stops", listener.local_addr()?, net.backend());
    axum::serve(listener, app).with_graceful_shutdown(common::shutdown_signal()).await?;
    // Closed connections deliver their last bytes before the transport goes.
    net.drain(Duration::from_secs(2)).await;
    println!("stopped");
    Ok(())
}
