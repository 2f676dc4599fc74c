//! A moto S3 (and SQS) server for the tests: the `moto` server from PyPI, started on
//! 127.0.0.1, with helpers to put and list objects and read a Delta table in a bucket
//! back with Python `deltalake`.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use object_store::{ObjectStoreExt, PutPayload};

use super::wait_until;

/// A secret that must never appear in any output.
pub const CANARY: &str = "canary-secret-7f3a9c";

/// A moto S3 server on a free loopback port, killed when dropped.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    pub fn start() -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()))
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "moto server starts (python3 -m pip install 'moto[server]'; .ci/run installs it)",
            );
        wait_until(
            &format!("moto to listen on port {port}"),
            Duration::from_secs(30),
            || TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        Moto { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", CANARY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    pub fn create_bucket(&self, bucket: &str) {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(s, "PUT /{bucket} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n", self.port).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    }

    pub fn store(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key(CANARY)
            .build()
            .unwrap()
    }

    /// Keys under `prefix`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        use futures::TryStreamExt;
        use object_store::ObjectStore;
        let store = self.store(bucket);
        let mut keys: Vec<String> =
            block_on(store.list(Some(&prefix.into())).try_collect::<Vec<_>>())
                .unwrap()
                .into_iter()
                .map(|m| m.location.to_string())
                .collect();
        keys.sort();
        keys
    }

    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let store = self.store(bucket);
        block_on(async { store.get(&raw_key(key)).await.unwrap().bytes().await })
            .unwrap()
            .to_vec()
    }

    pub fn put(&self, bucket: &str, key: &str, body: impl Into<Vec<u8>>) {
        let store = self.store(bucket);
        let body: Vec<u8> = body.into();
        block_on(store.put(&raw_key(key), PutPayload::from(body))).unwrap();
    }

    /// Puts an object through a multipart upload of one part (moto then sends two
    /// `ObjectCreated` events for it, as `tests/it/sqs.rs` relies on).
    pub fn put_multipart(&self, bucket: &str, key: &str, body: impl Into<Vec<u8>>) {
        let store = self.store(bucket);
        let body: Vec<u8> = body.into();
        block_on(async {
            let mut upload = store.put_multipart(&raw_key(key)).await?;
            upload.put_part(PutPayload::from(body)).await?;
            upload.complete().await
        })
        .unwrap();
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An S3 key as written (object_store's `Path::from` would percent-encode `%` and
/// non-ASCII characters into another key).
pub fn raw_key(key: &str) -> object_store::path::Path {
    object_store::path::Path::parse(key).expect("a valid key")
}

/// Runs an object-store call from a test (the tests themselves are synchronous).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub fn run_with(moto: &Moto, args: &[String]) -> std::process::Output {
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    super::run(args, &env)
}

pub fn python_rows(moto: &Moto, table: &str) -> serde_json::Value {
    python_read(moto, table, &[])
}

/// Runs `read_delta.py` on an S3 table (keyed by `order_id`) with extra arguments.
pub fn python_read(moto: &Moto, table: &str, extra: &[&str]) -> serde_json::Value {
    python_read_by(moto, table, "order_id", extra)
}

/// Runs `read_delta.py` on an S3 table, its rows sorted by `key`.
pub fn python_read_by(moto: &Moto, table: &str, key: &str, extra: &[&str]) -> serde_json::Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/common/read_delta.py");
    let out = Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()))
        .arg(script)
        .arg(table)
        .arg(key)
        .args(extra)
        .envs(moto.env())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python deltalake on S3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn sorted_ids(py: &serde_json::Value) -> Vec<i64> {
    let mut ids: Vec<i64> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| match &r["order_id"] {
            serde_json::Value::String(t) => t.parse().unwrap(),
            v => v.as_i64().unwrap(),
        })
        .collect();
    ids.sort_unstable();
    ids
}
