//! Checks that every field, enum value and rpc we declare in `proto/filer.proto` and
//! `proto/s3_lifecycle.proto` matches (number, type, type name, label; rpc types and streaming)
//! what a live SeaweedFS serves through gRPC server reflection. Server-only extras are fine.

use crate::common;

use std::collections::HashMap;

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FileDescriptorProto, FileDescriptorSet,
    ServiceDescriptorProto,
};
use tonic::transport::Channel;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

/// The protobuf packages we mirror from SeaweedFS (our own admin API is not compared).
const MIRRORED_PACKAGES: &[&str] = &["filer_pb", "s3_lifecycle_pb", "master_pb"];

/// Fully-qualified name (".pkg.Msg", ".pkg.Msg.Nested") → definition, for one set of files.
#[derive(Default)]
struct Index {
    messages: HashMap<String, DescriptorProto>,
    enums: HashMap<String, EnumDescriptorProto>,
    services: HashMap<String, ServiceDescriptorProto>,
}

impl Index {
    fn add_file(&mut self, f: &FileDescriptorProto) {
        let scope = format!(".{}", f.package());
        for m in &f.message_type {
            self.add_message(&scope, m);
        }
        for e in &f.enum_type {
            self.enums
                .insert(format!("{scope}.{}", e.name()), e.clone());
        }
        for s in &f.service {
            self.services
                .insert(format!("{scope}.{}", s.name()), s.clone());
        }
    }

    fn add_message(&mut self, scope: &str, m: &DescriptorProto) {
        let name = format!("{scope}.{}", m.name());
        for nested in &m.nested_type {
            self.add_message(&name, nested);
        }
        for e in &m.enum_type {
            self.enums.insert(format!("{name}.{}", e.name()), e.clone());
        }
        self.messages.insert(name, m.clone());
    }
}

/// Every way `ours` disagrees with `served`, one line each. Only our declarations are checked.
fn differences(ours: &Index, served: &Index) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut names: Vec<_> = ours.messages.keys().collect();
    names.sort();
    for name in names {
        let mine = &ours.messages[name];
        let Some(theirs) = served.messages.get(name) else {
            diffs.push(format!("message {name}: not served"));
            continue;
        };
        for f in &mine.field {
            let Some(s) = theirs.field.iter().find(|s| s.name() == f.name()) else {
                let by_number = theirs.field.iter().find(|s| s.number() == f.number());
                diffs.push(format!(
                    "{name}.{} (= {}): no such field served{}",
                    f.name(),
                    f.number(),
                    by_number
                        .map(|s| format!("; number {} is `{}` there", s.number(), s.name()))
                        .unwrap_or_default()
                ));
                continue;
            };
            let mut check = |what: &str, a: String, b: String| {
                if a != b {
                    diffs.push(format!("{name}.{}: {what} ours {a}, served {b}", f.name()));
                }
            };
            check("number", f.number().to_string(), s.number().to_string());
            check(
                "type",
                format!("{:?}", f.r#type()),
                format!("{:?}", s.r#type()),
            );
            check(
                "type_name",
                f.type_name().to_string(),
                s.type_name().to_string(),
            );
            check(
                "label",
                format!("{:?}", f.label()),
                format!("{:?}", s.label()),
            );
        }
    }
    let mut names: Vec<_> = ours.enums.keys().collect();
    names.sort();
    for name in names {
        let Some(theirs) = served.enums.get(name) else {
            diffs.push(format!("enum {name}: not served"));
            continue;
        };
        for v in &ours.enums[name].value {
            match theirs.value.iter().find(|s| s.name() == v.name()) {
                None => diffs.push(format!(
                    "{name}.{} (= {}): no such value served",
                    v.name(),
                    v.number()
                )),
                Some(s) if s.number() != v.number() => diffs.push(format!(
                    "{name}.{}: number ours {}, served {}",
                    v.name(),
                    v.number(),
                    s.number()
                )),
                Some(_) => {}
            }
        }
    }
    let mut names: Vec<_> = ours.services.keys().collect();
    names.sort();
    for name in names {
        let Some(theirs) = served.services.get(name) else {
            diffs.push(format!("service {name}: not served"));
            continue;
        };
        for m in &ours.services[name].method {
            let Some(s) = theirs.method.iter().find(|s| s.name() == m.name()) else {
                diffs.push(format!("{name}/{}: no such rpc served", m.name()));
                continue;
            };
            let sig = |x: &prost_types::MethodDescriptorProto| {
                format!(
                    "({}{}) returns ({}{})",
                    if x.client_streaming() { "stream " } else { "" },
                    x.input_type(),
                    if x.server_streaming() { "stream " } else { "" },
                    x.output_type()
                )
            };
            if sig(m) != sig(s) {
                diffs.push(format!(
                    "{name}/{}: ours {}, served {}",
                    m.name(),
                    sig(m),
                    sig(s)
                ));
            }
        }
    }
    diffs
}

fn our_files() -> Vec<FileDescriptorProto> {
    let set = FileDescriptorSet::decode(s3_lifecycled::pb::FILE_DESCRIPTOR_SET)
        .expect("build.rs descriptor set decodes");
    set.file
}

fn our_index(package: &str) -> Index {
    assert!(
        MIRRORED_PACKAGES.contains(&package),
        "{package} is not a mirrored SeaweedFS package"
    );
    let mut idx = Index::default();
    for f in our_files().iter().filter(|f| f.package() == package) {
        idx.add_file(f);
    }
    assert!(
        !idx.messages.is_empty() || !idx.services.is_empty(),
        "we declare nothing in package {package}"
    );
    idx
}

/// Asks the server's reflection service for the file declaring `symbol` (and its dependencies).
async fn served_index(url: String, symbol: &str) -> Index {
    let channel = Channel::from_shared(url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ServerReflectionClient::new(channel).max_decoding_message_size(1 << 30);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_string())),
    };
    let mut stream = client
        .server_reflection_info(futures::stream::iter(vec![req]))
        .await
        .unwrap_or_else(|e| panic!("reflection on {url}: {e}"))
        .into_inner();
    let resp = stream
        .message()
        .await
        .unwrap()
        .expect("one reflection response");
    let files = match resp.message_response {
        Some(MessageResponse::FileDescriptorResponse(f)) => f.file_descriptor_proto,
        other => panic!("reflection on {url} for {symbol}: unexpected answer {other:?}"),
    };
    let mut idx = Index::default();
    for bytes in files {
        idx.add_file(&FileDescriptorProto::decode(bytes.as_slice()).unwrap());
    }
    idx
}

/// Fields the server has in messages we declare but that we omit: harmless for reading, but an
/// entry read and written back through our subset loses them (docs/grpc.md#proto-subset). Printed.
fn server_only_fields(ours: &Index, served: &Index) -> Vec<String> {
    let mut out = Vec::new();
    for (name, mine) in &ours.messages {
        let Some(theirs) = served.messages.get(name) else {
            continue;
        };
        for s in &theirs.field {
            if !mine.field.iter().any(|f| f.name() == s.name()) {
                out.push(format!("{name}.{} = {}", s.name(), s.number()));
            }
        }
    }
    out.sort();
    out
}

fn assert_conforms(package: &str, served: &Index) {
    let extra = server_only_fields(&our_index(package), served);
    eprintln!(
        "{package}: served fields we do not declare ({}):\n  {}",
        extra.len(),
        extra.join("\n  ")
    );
    let diffs = differences(&our_index(package), served);
    assert!(
        diffs.is_empty(),
        "proto/{package} differs from the live SeaweedFS ({} differences):\n  {}",
        diffs.len(),
        diffs.join("\n  ")
    );
}

#[tokio::test]
async fn filer_proto_matches_live_filer() {
    let c = common::cluster();
    let served = served_index(c.filer_grpc_url(), "filer_pb.SeaweedFiler").await;
    assert_conforms("filer_pb", &served);
}

#[tokio::test]
async fn s3_lifecycle_proto_matches_live_s3_server() {
    let c = common::cluster();
    let served = served_index(
        c.s3_grpc_url(),
        "s3_lifecycle_pb.SeaweedS3LifecycleInternal",
    )
    .await;
    assert_conforms("s3_lifecycle_pb", &served);
}

#[tokio::test]
async fn master_proto_matches_live_master() {
    let c = common::cluster();
    let served = served_index(
        format!("http://{}", c.master_grpc_addr()),
        "master_pb.Seaweed",
    )
    .await;
    assert_conforms("master_pb", &served);
}

/// The comparison itself must catch each kind of mismatch (against our own descriptors, no server).
#[test]
fn comparison_reports_every_kind_of_mismatch() {
    let ours = our_index("filer_pb");
    assert!(differences(&ours, &ours).is_empty());

    let mut files = our_files();
    let filer = files
        .iter_mut()
        .find(|f| f.package() == "filer_pb")
        .unwrap();
    let entry = filer
        .message_type
        .iter_mut()
        .find(|m| m.name() == "Entry")
        .unwrap();
    entry
        .field
        .iter_mut()
        .find(|f| f.name() == "name")
        .unwrap()
        .number = Some(99);
    let fid = filer
        .message_type
        .iter_mut()
        .find(|m| m.name() == "FileId")
        .unwrap();
    // fixed32 -> uint32 is the classic silent wire mismatch for `cookie`.
    fid.field
        .iter_mut()
        .find(|f| f.name() == "cookie")
        .unwrap()
        .r#type = Some(13);
    let chunk = filer
        .message_type
        .iter_mut()
        .find(|m| m.name() == "FileChunk")
        .unwrap();
    chunk.field.retain(|f| f.name() != "e_tag");
    let err = filer
        .enum_type
        .iter_mut()
        .find(|e| e.name() == "FilerError")
        .unwrap();
    err.value
        .iter_mut()
        .find(|v| v.name() == "PRECONDITION_FAILED")
        .unwrap()
        .number = Some(7);
    let svc = filer
        .service
        .iter_mut()
        .find(|s| s.name() == "SeaweedFiler")
        .unwrap();
    svc.method
        .iter_mut()
        .find(|m| m.name() == "ListEntries")
        .unwrap()
        .server_streaming = Some(false);
    let mut mutated = Index::default();
    mutated.add_file(filer);

    let diffs = differences(&ours, &mutated);
    let has = |needle: &str| diffs.iter().any(|d| d.contains(needle));
    assert!(
        has(".filer_pb.Entry.name: number ours 1, served 99"),
        "{diffs:#?}"
    );
    assert!(
        has(".filer_pb.FileId.cookie: type ours Fixed32, served Uint32"),
        "{diffs:#?}"
    );
    assert!(
        has(".filer_pb.FileChunk.e_tag (= 5): no such field served"),
        "{diffs:#?}"
    );
    assert!(
        has(".filer_pb.FilerError.PRECONDITION_FAILED: number ours 6, served 7"),
        "{diffs:#?}"
    );
    assert!(has(".filer_pb.SeaweedFiler/ListEntries"), "{diffs:#?}");
    assert_eq!(diffs.len(), 5, "{diffs:#?}");
}
