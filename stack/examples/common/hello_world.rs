//! `helloworld.proto`'s Greeter (tonic's own example), written out as `tonic-build` would
//! generate it: prost derives for the messages, tonic's `Grpc` for the service and client.
//! Hand-written so that building the examples needs no `protoc` (nor a build script pulling
//! a vendored one) on a fresh machine; the wire format is the same, so any gRPC client of
//! that proto talks to it.
//!
//! ```proto
//! package helloworld;
//! service Greeter { rpc SayHello (HelloRequest) returns (HelloReply); }
//! message HelloRequest { string name = 1; }
//! message HelloReply { string message = 1; }
//! ```

#![allow(dead_code)]

#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloRequest {
    #[prost(string, tag = "1")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloReply {
    #[prost(string, tag = "1")]
    pub message: String,
}

const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";

pub mod greeter_server {
    use tonic::codegen::*;

    use super::{HelloReply, HelloRequest};

    #[async_trait]
    pub trait Greeter: Send + Sync + 'static {
        async fn say_hello(&self, request: tonic::Request<HelloRequest>) -> Result<tonic::Response<HelloReply>, tonic::Status>;
    }

    pub struct GreeterServer<T> {
        inner: Arc<T>,
    }

    impl<T> GreeterServer<T> {
        pub fn new(inner: T) -> Self {
            GreeterServer { inner: Arc::new(inner) }
        }
    }

    impl<T> Clone for GreeterServer<T> {
        fn clone(&self) -> Self {
            GreeterServer { inner: self.inner.clone() }
        }
    }

    impl<T> tonic::server::NamedService for GreeterServer<T> {
        const NAME: &'static str = "helloworld.Greeter";
    }

    struct SayHelloSvc<T>(Arc<T>);

    impl<T: Greeter> tonic::server::UnaryService<HelloRequest> for SayHelloSvc<T> {
        type Response = HelloReply;
        type Future = BoxFuture<tonic::Response<HelloReply>, tonic::Status>;

        fn call(&mut self, request: tonic::Request<HelloRequest>) -> Self::Future {
            let inner = self.0.clone();
            Box::pin(async move { inner.say_hello(request).await })
        }
    }

    impl<T, B> Service<http::Request<B>> for GreeterServer<T>
    where
        T: Greeter,
        B: Body + Send + 'static,
        B::Error: Into<StdError> + Send + 'static,
    {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            if req.uri().path() != super::SAY_HELLO {
                return Box::pin(async { Ok(tonic::Status::unimplemented("").into_http()) });
            }
            let inner = self.inner.clone();
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                Ok(grpc.unary(SayHelloSvc(inner), req).await)
            })
        }
    }
}

pub mod greeter_client {
    use tonic::codegen::http::uri::PathAndQuery;

    use super::{HelloReply, HelloRequest};

    pub struct GreeterClient {
        inner: tonic::client::Grpc<tonic::transport::Channel>,
    }

    impl GreeterClient {
        pub async fn connect(dst: String) -> Result<Self, tonic::transport::Error> {
            let channel = tonic::transport::Endpoint::new(dst)?.connect().await?;
            Ok(GreeterClient { inner: tonic::client::Grpc::new(channel) })
        }

        pub async fn say_hello(
            &mut self,
            request: impl tonic::IntoRequest<HelloRequest>,
        ) -> Result<tonic::Response<HelloReply>, tonic::Status> {
            self.inner.ready().await.map_err(|e| tonic::Status::unknown(format!("service was not ready: {e}")))?;
            let codec = tonic_prost::ProstCodec::default();
            self.inner.unary(request.into_request(), PathAndQuery::from_static(super::SAY_HELLO), codec).await
        }
    }
}
