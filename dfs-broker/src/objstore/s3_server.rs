//! A real S3-compatible server on a loopback port (moto's server mode, from PyPI), for the
//! object-store tests and `ht bench dfs`. `.ci/run` installs it; `HT_MOTO_PYTHON` names another
//! Python interpreter.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{ObjectStoreFs, ObjectStoreOptions};
use crate::FsResult;

/// A moto S3 server with one bucket; killed when dropped.
pub struct S3TestServer {
    child: Child,
    port: u16,
    bucket: String,
    _log_dir: tempfile::TempDir,
}

impl S3TestServer {
    /// Starts moto and creates `bucket`; the error says why it could not (not installed, did
    /// not answer within 60 s, refused the bucket), with moto's output.
    pub fn start(bucket: &str) -> Result<S3TestServer, String> {
        let python = std::env::var("HT_MOTO_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let log_dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let log_path: PathBuf = log_dir.path().join("moto.log");
        let log = std::fs::File::create(&log_path).map_err(|e| format!("moto log: {e}"))?;
        let log2 = log.try_clone().map_err(|e| format!("moto log: {e}"))?;
        let child = Command::new(&python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start the S3 test server: `{python} -m moto.server` failed: {e}; \
                     install it with `python3 -m pip install 'moto[server]'`"
                )
            })?;
        let mut server = S3TestServer {
            child,
            port,
            bucket: bucket.to_string(),
            _log_dir: log_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!(
                    "the S3 test server (`{python} -m moto.server`) exited with {status}; is \
                     moto installed (`python3 -m pip install 'moto[server]'`)? Its output:\n{log}"
                ));
            }
            if let Ok(status) = server.request("PUT", &format!("/{bucket}")) {
                if status != 200 {
                    return Err(format!(
                        "creating bucket {bucket} on moto answered HTTP {status}"
                    ));
                }
                return Ok(server);
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!(
                    "the S3 test server did not answer on port {port} within 60 s:\n{log}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends a bodiless HTTP/1.1 request; returns the status code.
    pub fn request(&self, method: &str, target: &str) -> std::io::Result<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        )?;
        let mut resp = String::new();
        s.read_to_string(&mut resp)?;
        resp.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad HTTP response: {resp:.200}")))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Options that reach this server (endpoint, test credentials, plain HTTP).
    pub fn options(&self) -> ObjectStoreOptions {
        ObjectStoreOptions {
            endpoint: Some(format!("http://127.0.0.1:{}", self.port)),
            region: Some("us-east-1".into()),
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
            allow_http: Some(true),
            ..Default::default()
        }
    }

    /// A file system under `prefix` of the bucket.
    pub fn fs(&self, prefix: &str) -> FsResult<ObjectStoreFs> {
        let url = format!("s3://{}/{prefix}", self.bucket);
        ObjectStoreFs::from_url(&url, self.options())
    }
}

impl Drop for S3TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
