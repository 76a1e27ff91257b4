//! An in-process OTLP/gRPC trace receiver: collects every exported span and the `service.name`
//! of each resource.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

/// What the receiver got.
#[derive(Default, Clone)]
pub struct Receiver {
    /// Every span, in arrival order.
    pub spans: Arc<Mutex<Vec<OtlpSpan>>>,
    /// `service.name` of every resource that sent spans.
    pub service_names: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        for rs in request.into_inner().resource_spans {
            if let Some(res) = &rs.resource {
                for kv in &res.attributes {
                    if kv.key == "service.name"
                        && let Some(Value::StringValue(v)) =
                            kv.value.as_ref().and_then(|v| v.value.clone())
                    {
                        self.service_names.lock().unwrap().push(v);
                    }
                }
            }
            for ss in rs.scope_spans {
                self.spans.lock().unwrap().extend(ss.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A receiver serving on a free loopback port until [`Collector::stop`].
pub struct Collector {
    /// What it got.
    pub receiver: Receiver,
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Collector {
    /// Starts one.
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = Receiver::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(receiver.clone()))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                }),
        );
        Collector {
            receiver,
            addr,
            stop: Some(stop),
            server,
        }
    }

    /// The endpoint URL exporters are given.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A copy of the spans received so far.
    pub fn spans(&self) -> Vec<OtlpSpan> {
        self.receiver.spans.lock().unwrap().clone()
    }

    /// Stops serving and waits for the server to end cleanly.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.server).await.unwrap().unwrap();
    }
}

/// A span attribute as text (strings as they are, other values formatted).
pub fn attr(span: &OtlpSpan, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
        .map(|v| match v {
            Value::StringValue(s) => s.clone(),
            Value::IntValue(i) => i.to_string(),
            Value::BoolValue(b) => b.to_string(),
            Value::DoubleValue(d) => d.to_string(),
            other => format!("{other:?}"),
        })
}
