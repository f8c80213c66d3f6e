//! Signed attestations end to end: `idem keygen`, runs signed with
//! `--sign-key` (Delta and Iceberg), `audit --key` and `verify --key`, an
//! independent DSSE implementation (PyPI securesystemslib over
//! pyca/cryptography, tests/dsse_check.py) verifying idem's envelopes and
//! signing one idem verifies, and the tampering an auditor must catch.

mod common;

use common::dsse_check;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

struct Fixture {
    dir: tempfile::TempDir,
    module: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["2026-10-01", "2026-10-02"] {
            common::orders(&dir.path().join("orders"), d, 2_000, 1);
        }
        Fixture {
            dir,
            module: common::guest("examples/clean_orders"),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `idem run --json` of `date` into `table` with `extra`; its JSON.
    fn run(&self, date: &str, table: &str, extra: &[&str]) -> Value {
        self.run_env(date, table, extra, &[])
    }
    /// The same, with `env` set.
    fn run_env(&self, date: &str, table: &str, extra: &[&str], env: &[(&str, &str)]) -> Value {
        let mut args = common::day_args(
            &s(&self.module),
            &s(&self.path("orders")),
            date,
            table,
            &["--json"],
        );
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = common::idem_env(&args, env);
        assert_eq!(code, 0, "{out}{err}");
        serde_json::from_str(&out).unwrap()
    }
    /// A key pair from `idem keygen`: (private, public, key id).
    fn keygen(&self, name: &str) -> (String, String, String) {
        let private = self.path(&format!("{name}.pem"));
        let (code, out, err) = common::idem(&["keygen", "--out", &s(&private), "--json"]);
        assert_eq!(code, 0, "{err}");
        common::check_schemas(&[("keygen", &out)]).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        (
            s(&private),
            v["publicKey"].as_str().unwrap().to_string(),
            v["keyid"].as_str().unwrap().to_string(),
        )
    }
    /// A key pair made by pyca/cryptography (the PEM openssl writes).
    fn python_keygen(&self, name: &str) -> (String, String, String) {
        let (private, public) = (
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}.pub.pem")),
        );
        let out = dsse_check(&["keygen", &s(&private), &s(&public)]).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        (s(&private), s(&public), v["keyid"].as_str().unwrap().into())
    }
}

/// `idem audit table --json` with `--key` for each of `keys`: exit code
/// and slice -> (proof, detail).
fn audit(table: &str, keys: &[&str]) -> (i32, Vec<(String, String, String)>) {
    let mut args = vec!["audit", table, "--json"];
    for k in keys {
        args.extend(["--key", k]);
    }
    let (code, out, err) = common::idem(&args);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let slices = v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (f("slice"), f("proof"), f("detail"))
        })
        .collect();
    (code, slices)
}

fn envelope_of(run: &Value) -> (String, PathBuf) {
    let e = &run["envelope"];
    let url = e["url"]
        .as_str()
        .unwrap_or_else(|| panic!("unsigned: {run}"));
    let path = url.strip_prefix("file://").unwrap();
    (
        e["digest"].as_str().unwrap().to_string(),
        PathBuf::from(path),
    )
}

fn manifest_of(run: &Value) -> PathBuf {
    let url = run["manifest"].as_str().unwrap();
    PathBuf::from(url.strip_prefix("file://").unwrap())
}

/// A v2 manifest as runs write it: valid under the schema, its
/// provenance naming the determinism profile, the module's imports and
/// every input by digest.
fn check_provenance(manifest: &[u8]) {
    let m: Value = serde_json::from_slice(manifest).unwrap();
    assert_eq!(m["predicateType"], "https://idem.dev/run-manifest/v2");
    let b = &m["predicate"]["buildDefinition"];
    assert_eq!(b["buildType"], "https://idem.dev/run/v1");
    let det = &b["internalParameters"]["determinism"];
    assert_eq!(det["profile"], "strict");
    assert_eq!(det["nanCanonicalization"], true);
    assert_eq!(det["fuelMetered"], false);
    let imports = det["imports"].as_array().unwrap();
    assert!(
        imports
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("idem:transform/")),
        "{det}"
    );
    assert_eq!(
        b["internalParameters"]["engine"],
        m["predicate"]["run"]["engine"]
    );
    let inputs = m["predicate"]["run"]["slice"]["inputs"].as_array().unwrap();
    let deps = b["resolvedDependencies"].as_array().unwrap();
    assert_eq!(deps.len(), inputs.len() + 1, "{deps:?}");
    for input in inputs {
        assert!(
            deps.iter().any(|d| {
                format!("sha256:{}", d["digest"]["sha256"].as_str().unwrap())
                    == input["digest"].as_str().unwrap()
                    && d["uri"]
                        .as_str()
                        .unwrap()
                        .ends_with(input["path"].as_str().unwrap())
            }),
            "{input} not in {deps:?}"
        );
    }
    assert_eq!(
        m["predicate"]["runDetails"]["metadata"]["invocationId"],
        m["predicate"]["runKey"]
    );
    common::check_schemas(&[("manifest", std::str::from_utf8(manifest).unwrap())]).unwrap();
}

fn verify(file: &Path, keys: &[&str]) -> (i32, String) {
    let mut args = vec!["verify".to_string(), s(file)];
    for k in keys {
        args.extend(["--key".to_string(), k.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = common::idem(&args);
    (code, format!("{out}{err}"))
}

#[test]
fn signed_runs_pass_audit_by_their_key_and_an_independent_verifier_agrees() {
    let fx = Fixture::new();
    let (team, team_pub, team_id) = fx.keygen("team");
    // The private key is readable by its owner only; keygen never
    // overwrites one.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&team).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (code, _, err) = common::idem(&["keygen", "--out", &team]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("never overwrites a key"), "{err}");

    let table = s(&fx.path("t"));
    let runs: Vec<Value> = ["2026-10-01", "2026-10-02"]
        .iter()
        .map(|d| fx.run(d, &table, &["--sign-key", &team]))
        .collect();
    let out = serde_json::to_string(&runs[0]).unwrap();
    common::check_schemas(&[("run", &out)]).unwrap();
    // The commit names the envelope it was made with.
    for (i, r) in runs.iter().enumerate() {
        let (digest, path) = envelope_of(r);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(digest, format!("sha256:{}", sha256_hex(&bytes)));
        let commit =
            std::fs::read_to_string(fx.path("t").join(format!("_delta_log/{:020}.json", i + 1)))
                .unwrap();
        assert!(
            commit.contains(&format!("\"idem.envelopeDigest\":\"{digest}\"")),
            "{commit}"
        );
        // securesystemslib verifies it with the public key idem wrote, and
        // its payload is the manifest, byte for byte.
        let v: Value =
            serde_json::from_str(&dsse_check(&["verify", &s(&path), &team_pub]).unwrap()).unwrap();
        assert_eq!(v["keyid"], team_id.as_str());
        assert_eq!(v["payloadType"], "application/vnd.in-toto+json");
        let manifest = std::fs::read(manifest_of(r)).unwrap();
        check_provenance(&manifest);
        assert_eq!(
            format!("sha256:{}", v["payloadSha256"].as_str().unwrap()),
            r["manifestDigest"].as_str().unwrap()
        );
        assert_eq!(sha256_hex(&manifest), v["payloadSha256"].as_str().unwrap());
    }
    let (code, slices) = audit(&table, &[&team_pub]);
    assert_eq!(code, 0, "{slices:?}");
    assert_eq!(slices.len(), 2);
    for (_, proof, detail) in &slices {
        assert_eq!(proof, "proven");
        assert!(
            detail.contains(&format!("signed by key {}", &team_id[..16])),
            "{detail}"
        );
    }
    assert_eq!(audit(&table, &[]).0, 0, "without --key: as before");
    // Imports the module does not declare, stated in a copy of a
    // manifest (the rest follows from its spec, so it reads): verify's
    // replay compares them with the stored module's and refuses it.
    let text = std::fs::read_to_string(manifest_of(&runs[0])).unwrap();
    let import = "\"imports\":[\"";
    assert!(text.contains(import), "{text}");
    let edited = fx.path("edited.json");
    std::fs::write(
        &edited,
        text.replacen(
            import,
            &format!("{import}wasi:clocks/wall-clock@0.2.3\",\""),
            1,
        ),
    )
    .unwrap();
    let (code, out) = verify(&edited, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the manifest states the module's imports") && out.contains("wall-clock"),
        "{out}"
    );
    assert_eq!(verify(&manifest_of(&runs[0]), &[]).0, 0);

    // A key made elsewhere (pyca/cryptography, openssl's PEM): it signed
    // nothing here, so every slice fails, named.
    let (other, other_pub, other_id) = fx.python_keygen("other");
    let (code, slices) = audit(&table, &[&other_pub]);
    assert_eq!(code, 1);
    for (slice, proof, detail) in &slices {
        assert!(slice.starts_with("date=2026-10-0"), "{slice}");
        assert_eq!(proof, "failed");
        assert!(detail.contains("by none of the keys given"), "{detail}");
    }
    assert_eq!(
        audit(&table, &[&other_pub, &team_pub]).0,
        0,
        "one of the keys"
    );

    // A memo hit signs nothing (the manifest it found is a file anyone
    // who can write the table can plant); it reports an envelope its key
    // made before, when there is one.
    let memo = fx.run("2026-10-01", &table, &["--sign-key", &other]);
    assert_eq!(memo["outcome"]["kind"], "memo");
    assert!(memo["envelope"].is_null(), "{memo}");
    let memo = fx.run("2026-10-01", &table, &["--sign-key", &team]);
    assert_eq!(memo["outcome"]["kind"], "memo");
    assert_eq!(memo["envelope"], runs[0]["envelope"]);
    assert_eq!(audit(&table, &[&other_pub]).0, 1);
    // Rotation: the run executed again (--force) makes the same manifest,
    // which the commit names, and signs it with the new key.
    let again = fx.run("2026-10-01", &table, &["--sign-key", &other, "--force"]);
    assert_eq!(again["outcome"]["kind"], "unchanged");
    assert_eq!(again["manifestDigest"], runs[0]["manifestDigest"]);
    let (_, path) = envelope_of(&again);
    let v: Value =
        serde_json::from_str(&dsse_check(&["verify", &s(&path), &other_pub]).unwrap()).unwrap();
    assert_eq!(v["keyid"], other_id.as_str());
    let (code, slices) = audit(&table, &[&other_pub]);
    assert_eq!(code, 1);
    assert_eq!(slices[0].1, "proven", "{slices:?}");
    assert_eq!(slices[1].1, "failed", "{slices:?}");

    // An envelope securesystemslib signed over idem's manifest: idem
    // verifies it with that key only.
    let foreign = fx.path("foreign.dsse.json");
    dsse_check(&["sign", &s(&manifest_of(&runs[1])), &other, &s(&foreign)]).unwrap();
    let (code, out) = verify(&foreign, &[&other_pub]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("envelope: signed by key {}", &other_id[..16])),
        "{out}"
    );
    assert!(out.contains("match: re-run produced"), "{out}");
    let (code, out) = verify(&foreign, &[&team_pub]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("by none of the keys given"), "{out}");
    // DSSE makes the key id optional: without one, every key is tried.
    let mut v: Value = serde_json::from_slice(&std::fs::read(&foreign).unwrap()).unwrap();
    v["signatures"][0]["keyid"] = "".into();
    std::fs::write(&foreign, serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(verify(&foreign, &[&team_pub, &other_pub]).0, 0);
    assert_eq!(verify(&foreign, &[&team_pub]).0, 1);
    // A bare manifest with --key: its envelopes beside it are looked up.
    let (code, out) = verify(&manifest_of(&runs[1]), &[&team_pub]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("signature: signed by key"), "{out}");

    // Iceberg: the slice record names the envelope, audit checks it.
    let catalog = fx.path("lake/catalog.db");
    std::fs::create_dir_all(catalog.parent().unwrap()).unwrap();
    let ice = format!("iceberg+sqlite://{}#sales.t", s(&catalog));
    let r = fx.run("2026-10-01", &ice, &["--sign-key", &team]);
    let (_, path) = envelope_of(&r);
    let (code, slices) = audit(&ice, &[&team_pub]);
    assert_eq!(code, 0, "{slices:?}");
    assert!(slices[0].2.contains("signed by key"), "{slices:?}");
    assert_eq!(audit(&ice, &[&other_pub]).0, 1);
    // The slice's record names its envelope: gone, audit says so.
    std::fs::remove_file(&path).unwrap();
    let (code, slices) = audit(&ice, &[&team_pub]);
    assert_eq!(code, 1);
    assert!(
        slices[0].2.contains("the envelope the commit names"),
        "{slices:?}"
    );
}

#[test]
fn tampered_copied_and_missing_envelopes_fail_naming_the_slice() {
    let fx = Fixture::new();
    let (team, team_pub, _) = fx.keygen("team");
    let (other, _, _) = fx.keygen("other");
    let (a, b) = (s(&fx.path("a")), s(&fx.path("b")));
    let a1 = fx.run("2026-10-01", &a, &["--sign-key", &team]);
    let a2 = fx.run("2026-10-02", &a, &["--sign-key", &team]);
    let b1 = fx.run("2026-10-01", &b, &["--sign-key", &team]);
    let (_, env1) = envelope_of(&a1);
    let (_, env2) = envelope_of(&a2);
    assert_eq!(verify(&env1, &[&team_pub]).0, 0);
    let edit = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_slice(&std::fs::read(&env1).unwrap()).unwrap();
        f(&mut v);
        let p = fx.path(name);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        p
    };
    // One byte of the payload flipped (a row count in the manifest).
    let flipped = edit("flipped.json", &|v| {
        let mut p = B64.decode(v["payload"].as_str().unwrap()).unwrap();
        let at = find(&p, b"\"rowsOut\":") + 10;
        p[at] = if p[at] == b'1' { b'2' } else { b'1' };
        v["payload"] = B64.encode(p).into();
    });
    let (code, out) = verify(&flipped, &[&team_pub]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("does not verify: the envelope was altered"),
        "{out}"
    );
    // The signature of another manifest's envelope.
    let e2: Value = serde_json::from_slice(&std::fs::read(&env2).unwrap()).unwrap();
    let swapped = edit("swapped.json", &|v| {
        v["signatures"][0]["sig"] = e2["signatures"][0]["sig"].clone();
    });
    let (code, out) = verify(&swapped, &[&team_pub]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not verify"), "{out}");
    // The key id edited (matched by key id, as securesystemslib does).
    let rekeyed = edit("rekeyed.json", &|v| {
        v["signatures"][0]["keyid"] = "0".repeat(64).into();
    });
    let (code, out) = verify(&rekeyed, &[&team_pub]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("by none of the keys given"), "{out}");
    assert!(dsse_check(&["verify", &s(&rekeyed), &team_pub]).is_err());

    // In the table: slice 1's envelope replaced by table b's (valid, same
    // key, another manifest), slice 2's by one another key signed.
    let (_, env_b1) = envelope_of(&b1);
    let dir1 = env1.parent().unwrap().to_path_buf();
    std::fs::remove_file(&env1).unwrap();
    std::fs::copy(&env_b1, dir1.join(env_b1.file_name().unwrap())).unwrap();
    let resigned = fx.run("2026-10-02", &a, &["--sign-key", &other, "--force"]);
    assert_eq!(resigned["outcome"]["kind"], "unchanged");
    std::fs::remove_file(&env2).unwrap();
    let (code, slices) = audit(&a, &[&team_pub]);
    assert_eq!(code, 1, "{slices:?}");
    assert_eq!(slices[0].0, "date=2026-10-01");
    assert_eq!(slices[0].1, "failed");
    assert!(
        slices[0].2.contains("is for another manifest"),
        "{slices:?}"
    );
    assert!(
        slices[0].2.contains("is missing"),
        "the commit's own: {slices:?}"
    );
    assert_eq!(slices[1].0, "date=2026-10-02");
    assert!(
        slices[1].2.contains("by none of the keys given"),
        "{slices:?}"
    );
    let (code, out) = verify(&manifest_of(&a1), &[&team_pub]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is for another manifest"), "{out}");

    // A whole table copied (files, log, manifests, envelopes): every
    // slice is a run into the other table, signature or not.
    let copy = fx.path("copy");
    copy_dir(&fx.path("b"), &copy);
    let (code, slices) = audit(&s(&copy), &[&team_pub]);
    assert_eq!(code, 1, "{slices:?}");
    assert!(
        slices[0].2.contains("copied from another table"),
        "{slices:?}"
    );
    assert_eq!(audit(&s(&copy), &[]).0, 1);

    // A run whose output was current already (another run key: a batch
    // size) commits nothing: the slice's commit names the earlier
    // manifest, so this run's envelope is not reported as the slice's.
    let (module, orders) = (s(&fx.module), s(&fx.path("orders")));
    let (code, out, err) = common::idem(&[
        "run",
        "--module",
        &module,
        "--input",
        &orders,
        "--partition",
        "date=2026-10-01",
        "--table",
        &b,
        "--batch-rows",
        "700",
        "--sign-key",
        &team,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let same: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(same["outcome"]["kind"], "unchanged", "{same}");
    assert!(same["envelope"].is_null(), "{same}");

    // An envelope too large to be one is refused before it is read.
    let (_, env_b) = envelope_of(&b1);
    std::fs::write(&env_b, vec![b' '; 33 << 20]).unwrap();
    let (code, slices) = audit(&b, &[&team_pub]);
    assert_eq!(code, 1);
    assert!(slices[0].2.contains("MiB idem reads"), "{slices:?}");

    // A slice run without a key is unsigned: audit --key fails it.
    let c = s(&fx.path("c"));
    fx.run("2026-10-01", &c, &[]);
    let (code, slices) = audit(&c, &[&team_pub]);
    assert_eq!(code, 1);
    assert!(slices[0].2.contains("is not signed"), "{slices:?}");
    assert!(slices[0].2.contains("--sign-key"), "{slices:?}");

    // Bad key files are input errors naming the file and the fix.
    let junk = fx.path("junk.pem");
    std::fs::write(&junk, "not a key").unwrap();
    let (code, out, err) = common::idem(&["audit", &a, "--key", &s(&junk)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("junk.pem is not an Ed25519 public key"),
        "{err}"
    );
    let mut args = common::day_args(
        &s(&fx.module),
        &s(&fx.path("orders")),
        "2026-10-01",
        &c,
        &["--sign-key"],
    );
    args.push(team_pub.clone());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = common::idem(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not an Ed25519 private key"), "{err}");
    assert!(err.contains("idem keygen"), "{err}");
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{} not found", String::from_utf8_lossy(needle)))
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A table whose slices the idem before manifests v2 committed (v1
/// manifests; `IDEM_FAULT_MANIFEST_V1` writes them byte for byte as it
/// did): this idem's runs of the same run key stay memo hits, even after a
/// forced rerun wrote the run's index with its own v2 manifest; audit
/// (with replay) proves them; a forced run signs nothing it did not
/// commit. And twins with other limits write the same v2 manifest.
#[test]
fn a_table_begun_by_the_previous_idem_keeps_its_memo_hits_and_proofs() {
    let fx = Fixture::new();
    let table = s(&fx.path("t"));
    let old = [("IDEM_FAULT_MANIFEST_V1", "yes")];
    let first = fx.run_env("2026-10-01", &table, &[], &old);
    assert_eq!(first["outcome"]["kind"], "committed");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(manifest_of(&first)).unwrap()).unwrap();
    assert_eq!(stored["predicateType"], "https://idem.dev/run-manifest/v1");
    // The same run by this idem: the same run key, a memo hit.
    let memo = fx.run("2026-10-01", &table, &[]);
    assert_eq!(memo["outcome"]["kind"], "memo", "{memo}");
    assert_eq!(memo["runKey"], first["runKey"]);
    // Forced: executed, the output unchanged, the commit still names the
    // v1 manifest; the run wrote its v2 one and pointed the index at it.
    let (key, _, _) = fx.keygen("team");
    let forced = fx.run("2026-10-01", &table, &["--force", "--sign-key", &key]);
    assert_eq!(forced["outcome"]["kind"], "unchanged", "{forced}");
    assert_ne!(forced["manifestDigest"], first["manifestDigest"]);
    assert!(
        forced["envelope"].is_null(),
        "signed a manifest no commit names: {forced}"
    );
    // Still a memo hit (the commit's manifest has this run key).
    let again = fx.run("2026-10-01", &table, &[]);
    assert_eq!(again["outcome"]["kind"], "memo", "{again}");
    assert_eq!(again["manifestDigest"], first["manifestDigest"]);
    let (code, out, err) = common::idem(&["audit", &table, "--replay"]);
    assert_eq!(code, 0, "{out}{err}");
    // Twins: a forced rerun of another slice under other limits writes
    // byte for byte the manifest its first run committed.
    let a = fx.run("2026-10-02", &table, &[]);
    let b = fx.run(
        "2026-10-02",
        &table,
        &[
            "--force",
            "--max-memory-mb",
            "300",
            "--deadline-ms",
            "54321",
        ],
    );
    assert_eq!(b["outcome"]["kind"], "unchanged", "{b}");
    assert_eq!(a["manifestDigest"], b["manifestDigest"]);
}
