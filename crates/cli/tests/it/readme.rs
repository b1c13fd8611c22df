//! The README's API examples run as written: every `sh` block that calls the API with `curl`
//! runs in `bash -euo pipefail` against a real `vantage serve`, with `VANTAGE_URL` and
//! `VANTAGE_ADMIN_TOKEN` set as the README tells an operator to, and `vantage` on the `PATH`.
//! Nothing leaves loopback: the examples name mirrors and endpoints on the internet, but no
//! prober runs, and a door's redirect is only read, never followed.

use reqwest::Method;
use serde_json::json;

use crate::harness::ServerProcess;

/// The `sh` blocks of `markdown` that call the API with `curl`.
fn api_examples(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(lines), "```") => {
                let block = lines.join("\n");
                if block.contains("curl ") {
                    blocks.push(block);
                }
                current = None;
            }
            (Some(lines), l) => lines.push(l),
            (None, _) => {}
        }
    }
    blocks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_api_examples_run_as_written() {
    let readme = include_str!("../../../../README.md");
    let blocks = api_examples(readme);
    assert!(blocks.len() >= 2, "the doors' and the steering examples: {blocks:?}");
    let s = ServerProcess::start().await;
    // What the examples take for granted: the regions the monitor example names.
    for code in ["ap-sg", "eu-de"] {
        let (st, v) = s.call(Method::POST, "/v1/regions", Some(json!({"code": code, "name": code}))).await;
        assert_eq!(st, 201, "{v}");
    }
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_vantage")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    for block in &blocks {
        // Written for the variables the README has the operator set, so that it runs here.
        assert!(block.contains("$VANTAGE_URL"), "a curl example without $VANTAGE_URL:\n{block}");
        let out = tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", block])
            .env("VANTAGE_URL", s.url.trim_end_matches('/'))
            .env("VANTAGE_ADMIN_TOKEN", &s.token)
            .env("PATH", &path)
            .output()
            .await
            .unwrap();
        let (stdout, stderr) = crate::text(&out);
        assert!(
            out.status.success(),
            "README block failed:\n{block}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        );
        if block.contains("/go/debian/") {
            // No prober has found the mirror live: the tenant's fallback takes the visitor.
            assert!(
                stdout.contains("302")
                    && stdout.to_lowercase().contains("location: https://deb.debian.org/debian/"),
                "{stdout}"
            );
        }
        if block.contains("/steer/live") {
            assert!(stdout.contains("\"PATHWAY-PRIORITY\"") && stdout.contains("cdn-a"), "{stdout}");
        }
    }
}
