//! tonic's hello-world Greeter on either backend (gRPC over h2c).
//!
//! ```text
//! cargo run -p stack --features tonic --example grpc_server -- kernel 50051
//! sudo target/debug/examples/grpc_server xsk eth1 198.18.0.100/24 50051   # AF_XDP (root)
//! target/debug/examples/grpc_client http://198.18.0.100:50051 1000
//! ```
//!
//! Next to tonic's own `helloworld-server` only the listener differs:
//! `serve_with_incoming(net.listen(port)?.into_incoming())` instead of `serve(addr)`
//! (`grpc_server tokio PORT` runs it with `serve(addr)`, to compare against). The
//! service code is in `common/hello_world.rs` (no protoc needed; it says why).

mod common;

use std::time::Duration;

use common::hello_world::greeter_server::{Greeter, GreeterServer};
use common::hello_world::{HelloReply, HelloRequest};
use tonic::{transport::Server, Request, Response, Status};

#[derive(Default)]
pub struct MyGreeter {}

#[tonic::async_trait]
impl Greeter for MyGreeter {
    async fn say_hello(&self, request: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let reply = HelloReply { message: format!("Hello {}!", request.into_inner().name) };
        Ok(Response::new(reply))
    }
}

/// Errors are printed with Display: their text says what to do (Debug, what `main` returning
/// a `Result` prints, hides it in a struct dump).
#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match try_main().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grpc_server: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    // For comparison, `grpc_server tokio PORT` serves on tokio's own listener, as tonic's
    // example does: `.serve(addr)`.
    if let Some(port) = common::tokio_port() {
        println!("GreeterServer on 0.0.0.0:{port} (tokio), Ctrl-C stops");
        Server::builder()
            .add_service(GreeterServer::new(MyGreeter::default()))
            .serve_with_shutdown(([0, 0, 0, 0], port).into(), common::shutdown_signal())
            .await?;
        println!("stopped");
        return Ok(());
    }

    let (net, port) = common::net_from_args("grpc_server", 50051)?;
    let listener = net.listen(port)?;
    println!("GreeterServer on {} ({}), Ctrl-C stops", listener.local_addr()?, net.backend());

    Server::builder()
        .add_service(GreeterServer::new(MyGreeter::default()))
        .serve_with_incoming_shutdown(listener.into_incoming(), common::shutdown_signal())
        .await?;
    net.drain(Duration::from_secs(2)).await;
    println!("stopped");
    Ok(())
}
