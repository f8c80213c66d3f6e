//! The inputs figures (`--only inputs`): what pinning a slice costs.
//!
//! a. Local: one file against eight of the same total bytes, on one core
//!    against all (sha256 + BLAKE3 of every byte, files spread over the
//!    cores), next to sha256 alone of one file on one core: the machine's
//!    SHA-256 speed, which a memo rerun pays.
//! b. Object storage: a partition of many small objects on the loopback
//!    S3 test server, without and with a simulated round trip
//!    (`--delay-ms`), against the serial bound objects x delay and against
//!    the same pin at 2 requests at once (a thread a core on this machine:
//!    how pins were fetched before).
//!
//! Each pin runs in a child process (`--pin`, this binary again), so one
//! core is a real one-core process (its affinity set before idem starts
//! any thread) and each pin starts as a scheduled run does.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use idem::slice::ResolvedSlice;

use crate::{Row, root, work_dir};

/// Objects in figure b's partition (`--inputs-objects`, 500).
static OBJECTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(500);
/// Figure b's simulated round trip.
const DELAY_MS: u64 = 20;
/// Figure a's MiB (`--inputs-mib`, 256).
static MIB: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(256);

fn objects() -> usize {
    OBJECTS.load(std::sync::atomic::Ordering::Relaxed)
}

fn bytes() -> u64 {
    MIB.load(std::sync::atomic::Ordering::Relaxed) << 20
}
const DATE: &str = "2026-10-01";

/// Both figures.
pub fn run(samples: u64, mib: u64, objects: usize, out: &mut Vec<Row>) {
    MIB.store(mib, std::sync::atomic::Ordering::Relaxed);
    OBJECTS.store(objects, std::sync::atomic::Ordering::Relaxed);
    local(samples, out);
    remote(samples, out);
}

/// Pin the partition `date=<DATE>` below `root` (a path or URL), on one
/// core when asked; print `{"secs", "inputs", "bytes"}`.
pub fn pin_child(args: &[String]) {
    if args[1] == "1" {
        one_core();
    }
    let start = Instant::now();
    let s = ResolvedSlice::from_partition(&args[0], &idem::slice::Partition::one("date", DATE))
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    let bytes: u64 = s.inputs.iter().map(|i| i.size).sum();
    println!(
        "{}",
        serde_json::json!({"secs": secs, "inputs": s.inputs.len(), "bytes": bytes})
    );
}

/// Keep this process (and every thread it starts) on its first allowed
/// core: `available_parallelism` then says 1.
fn one_core() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls only read
    // and write that set and this process's affinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
            0
        );
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .unwrap();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(first, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
    }
    assert_eq!(std::thread::available_parallelism().unwrap().get(), 1);
}

/// One pin in a child: seconds, inputs, bytes.
fn pin(root: &str, one: bool, env: &[(String, String)]) -> (f64, u64, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["--pin", root, if one { "1" } else { "0" }])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pin child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap();
    (v["secs"].as_f64().unwrap(), n("inputs"), n("bytes"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `files` files of pseudo-random bytes, `bytes()` in all, under
/// `inputs-<files>/date=<DATE>/` (made once, kept for later runs).
fn bytes_slice(files: u64) -> PathBuf {
    let dir = work_dir().join(format!("inputs-{files}x{}", bytes() >> 20));
    let marker = dir.join("_COMPLETE");
    if !marker.exists() {
        let part = dir.join(format!("date={DATE}"));
        std::fs::create_dir_all(&part).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ files;
        for f in 0..files {
            let mut w = std::io::BufWriter::new(
                std::fs::File::create(part.join(format!("part-{f:05}.parquet"))).unwrap(),
            );
            for _ in 0..bytes() / files / 8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                w.write_all(&x.to_le_bytes()).unwrap();
            }
        }
        std::fs::write(&marker, b"").unwrap();
    }
    dir
}

/// Figure a.
fn local(samples: u64, out: &mut Vec<Row>) {
    let (one, eight) = (bytes_slice(1), bytes_slice(8));
    let sides = [(&one, true), (&one, false), (&eight, true), (&eight, false)];
    let mut secs = vec![Vec::new(); sides.len()];
    // Warm the page cache, then alternate the sides.
    for (dir, _) in &sides[1..3] {
        pin(dir.to_str().unwrap(), false, &[]);
    }
    for _ in 0..samples.max(1) {
        for (i, (dir, one)) in sides.iter().enumerate() {
            secs[i].push(pin(dir.to_str().unwrap(), *one, &[]).0);
        }
    }
    let sha = sha256_one_core(
        &one.join(format!("date={DATE}/part-00000.parquet")),
        samples,
    );
    let mbs: Vec<f64> = secs
        .into_iter()
        .map(|s| bytes() as f64 / median(s) / 1e6)
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let row = |figure: String, a: f64, b: f64, bl: &str, target: &'static str| Row {
        figure,
        idem: format!("{a:.0} MB/s"),
        baseline: format!("{b:.0} MB/s {bl}"),
        ratio: a / b,
        target,
    };
    let mb = bytes() >> 20;
    out.push(row(
        format!("inputs a. pin 8 files ({mb} MiB), {cores} cores vs 1 core"),
        mbs[3],
        mbs[2],
        "1 core",
        "~cores",
    ));
    out.push(row(
        format!("inputs a. pin 1 file ({mb} MiB), {cores} cores vs 1 core"),
        mbs[1],
        mbs[0],
        "1 core",
        "1 (one stream)",
    ));
    out.push(row(
        format!("inputs a. pin 8 files vs 1 file, {cores} cores"),
        mbs[3],
        mbs[1],
        "1 file",
        "~cores",
    ));
    out.push(row(
        format!("inputs a. pin 8 files, {cores} cores vs sha256 alone, 1 core"),
        mbs[3],
        sha,
        "sha256",
        ">= 1 on 2+ cores",
    ));
}

/// The machine's SHA-256 speed: one file through sha256 alone, on this
/// thread, from the page cache (MB/s, median).
fn sha256_one_core(file: &Path, samples: u64) -> f64 {
    let runs = (0..samples.max(1))
        .map(|_| {
            let start = Instant::now();
            let (_, n) = idem::digest::Digest::of_file(file).unwrap();
            n as f64 / start.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    median(runs)
}

/// The loopback S3 test server (tests/s3_server.py) with its `flags`.
/// The tests' S3 server (tests/s3_server.py), stopped when dropped.
pub struct Server {
    child: std::process::Child,
    endpoint: String,
    /// The AWS variables that point a client at it.
    pub env: Vec<(String, String)>,
}

impl Server {
    /// Start it with bucket `bench` and `flags`.
    pub fn start(python: &Path, flags: &[&str]) -> Server {
        let mut child = Command::new(python)
            .arg(root().join("tests/s3_server.py"))
            .arg("bench")
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let endpoint = v["endpoint"].as_str().unwrap().to_string();
        let env = [
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", v["key"].as_str().unwrap()),
            ("AWS_SECRET_ACCESS_KEY", v["secret"].as_str().unwrap()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Server {
            child,
            endpoint,
            env,
        }
    }

    /// POST to one of the server's own paths (requests since the last
    /// call, the most held at once).
    fn take(&self, path: &str) -> serde_json::Value {
        let host = self.endpoint.trim_start_matches("http://");
        let mut conn = std::net::TcpStream::connect(host).unwrap();
        write!(
            conn,
            "POST {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).unwrap();
        serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap()
    }

    /// Median seconds of `samples` pins of `url` at `concurrency`
    /// requests at once, the requests of one, the most held at once.
    fn pins(&self, url: &str, concurrency: usize, samples: u64) -> (f64, u64, u64) {
        let mut env = self.env.clone();
        env.push(("IDEM_STORAGE_CONCURRENCY".into(), concurrency.to_string()));
        let mut secs = Vec::new();
        let (mut requests, mut most) = (0, 0);
        for _ in 0..samples.max(1) {
            self.take("/_idem/requests");
            self.take("/_idem/in-flight");
            secs.push(pin(url, false, &env).0);
            let r = self.take("/_idem/requests");
            requests = ["GET", "HEAD"].iter().filter_map(|m| r[m].as_u64()).sum();
            most = self.take("/_idem/in-flight")["max"].as_u64().unwrap();
        }
        (median(secs), requests, most)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Figure b. Skipped, saying so, without the tests' Python environment.
fn remote(samples: u64, out: &mut Vec<Row>) {
    let python = std::env::var_os("IDEM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-venv/bin/python"));
    if !python.exists() {
        println!(
            "inputs b skipped: no {} (run scripts/test once)",
            python.display()
        );
        return;
    }
    let dir = work_dir().join(format!("inputs-{}-objects", objects()));
    if !dir.join("_COMPLETE").exists() {
        idem::sample::write_day(&dir, DATE, objects() as u64 * 100, objects()).unwrap();
        std::fs::write(dir.join("_COMPLETE"), b"").unwrap();
    }
    let url = format!("s3://bench/many-{}", objects());
    let local = pin(dir.to_str().unwrap(), false, &[]);
    let (objects, bytes) = (local.1, local.2);
    let delay = DELAY_MS.to_string();
    for flags in [&[][..], &["--delay-ms", &delay][..]] {
        let server = Server::start(&python, flags);
        let up = Command::new(std::env::current_exe().unwrap())
            .envs(server.env.iter().map(|(k, v)| (k, v)))
            .args(["--upload", dir.to_str().unwrap(), &url])
            .status()
            .unwrap();
        assert!(up.success(), "uploading to the S3 test server");
        let c = idem::storage::concurrency().unwrap();
        let (secs, requests, most) = server.pins(&url, c, samples);
        let kb = bytes as f64 / 1e3;
        let what = |ms: &str| format!("inputs b. S3 pin {objects} objects ({kb:.0} kB), {ms}");
        if flags.is_empty() {
            out.push(Row {
                figure: what("0 ms a request, vs local disk"),
                idem: format!("{:.0} ms, {requests} req, {most} at once", secs * 1e3),
                baseline: format!("{:.0} ms local", local.0 * 1e3),
                ratio: local.0 / secs,
                target: "report",
            });
            continue;
        }
        let serial = objects as f64 * DELAY_MS as f64 / 1e3;
        out.push(Row {
            figure: what(&format!("{DELAY_MS} ms a request, vs objects x delay")),
            idem: format!("{:.0} ms, {requests} req, {most} at once", secs * 1e3),
            baseline: format!("{:.0} ms serial", serial * 1e3),
            ratio: secs / serial,
            target: "<= 0.2",
        });
        // How pins were fetched before: a thread a core, one GET each.
        let (before, _, most) = server.pins(&url, 2, 1);
        out.push(Row {
            figure: what(&format!("{DELAY_MS} ms, {c} at once vs 2 at once")),
            idem: format!("{:.0} ms", secs * 1e3),
            baseline: format!("{:.0} ms, {most} at once", before * 1e3),
            ratio: secs / before,
            target: "report",
        });
    }
}
