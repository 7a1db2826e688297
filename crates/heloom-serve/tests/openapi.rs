//! `openapi.yaml` and `docs/serve-api.md` name exactly the routes of the router in `src/api.rs`.

use std::collections::BTreeSet;
use std::path::Path;

/// A file relative to this crate's manifest directory.
fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The path of every `.route("PATH", ...)` in the router's source (comment lines skipped).
fn router_paths(src: &str) -> BTreeSet<String> {
    let code: String = src
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find(".route(") {
        rest = &rest[i + ".route(".len()..];
        let Some(quoted) = rest.trim_start().strip_prefix('"') else {
            panic!(
                "a .route( in src/api.rs does not start with a string literal: {:?}",
                rest.chars().take(60).collect::<String>()
            );
        };
        let end = quoted
            .find('"')
            .expect("a route path string in src/api.rs has no closing quote");
        paths.insert(quoted[..end].to_string());
        rest = &quoted[end + 1..];
    }
    paths
}

/// The keys of the top-level `paths:` mapping: lines `  /PATH:` (two spaces of indent).
fn yaml_paths(yaml: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut in_paths = false;
    for line in yaml.lines() {
        let trimmed = line.trim_end();
        if trimmed.is_empty() || trimmed.trim_start().starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') {
            // A top-level key: the paths section starts at `paths:` and ends at the next one.
            in_paths = trimmed == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        let Some(key) = trimmed.strip_prefix("  ") else {
            continue;
        };
        if key.starts_with(' ') {
            // Deeper than a path key (methods, parameters, ...).
            continue;
        }
        let path = key
            .strip_suffix(':')
            .unwrap_or_else(|| panic!("openapi.yaml: unexpected line in paths: {line:?}"));
        assert!(
            path.starts_with('/'),
            "openapi.yaml: path key {path:?} must be written unquoted, starting with '/'"
        );
        assert!(
            paths.insert(path.to_string()),
            "openapi.yaml: path {path} appears twice"
        );
    }
    paths
}

#[test]
fn openapi_names_every_route_and_no_other() {
    let router = router_paths(&read("src/api.rs"));
    assert!(
        router.contains("/v1") && router.contains("/v1/jobs/{id}"),
        "the route parser found {router:?} in src/api.rs"
    );
    let yaml = read("openapi.yaml");
    let documented = yaml_paths(&yaml);
    for path in &router {
        assert!(
            yaml.contains(&format!("\n  {path}:\n")),
            "openapi.yaml has no `  {path}:` key line in its paths section"
        );
        assert!(
            documented.contains(path),
            "openapi.yaml's paths section lacks {path}, a route of src/api.rs"
        );
    }
    for path in &documented {
        assert!(
            router.contains(path),
            "openapi.yaml names {path}, which the router in src/api.rs lacks"
        );
    }
    assert_eq!(router, documented);
}

#[test]
fn reference_page_mentions_every_route() {
    let router = router_paths(&read("src/api.rs"));
    assert!(!router.is_empty(), "no .route(\"...\") found in src/api.rs");
    let doc = read("../../docs/serve-api.md");
    for path in &router {
        assert!(
            doc.contains(&format!("`{path}`")),
            "docs/serve-api.md does not mention the route `{path}`"
        );
    }
}
