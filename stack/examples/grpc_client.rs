//! A stock tonic client (kernel TCP) for `grpc_server`: N unary calls on one channel, each
//! answer checked, each bounded to 10 s.
//!
//! ```text
//! grpc_client http://198.18.0.100:50051 1000    # prints "ok 1000", exit 0; any failure: exit 1
//! ```

#[path = "common/hello_world.rs"]
mod hello_world;

use std::time::Duration;

use hello_world::greeter_client::GreeterClient;
use hello_world::HelloRequest;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(Ok(n))) = (args.first(), args.get(1).map(|n| n.parse::<u64>())) else {
        eprintln!("usage: grpc_client http://HOST:PORT N");
        std::process::exit(2);
    };
    match run(url, n).await {
        Ok(()) => println!("ok {n}"),
        Err(e) => {
            eprintln!("grpc_client: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(url: &str, n: u64) -> Result<(), Box<dyn std::error::Error>> {
    let connect = GreeterClient::connect(url.to_string());
    let mut client = tokio::time::timeout(Duration::from_secs(10), connect).await.map_err(|_| "no connection in 10 s")??;
    for i in 0..n {
        let name = format!("call {i}");
        let call = client.say_hello(HelloRequest { name: name.clone() });
        let reply = tokio::time::timeout(Duration::from_secs(10), call).await.map_err(|_| format!("call {i}: no answer in 10 s"))??.into_inner();
        if reply.message != format!("Hello {name}!") {
            return Err(format!("call {i}: answer {:?}", reply.message).into());
        }
    }
    Ok(())
}
