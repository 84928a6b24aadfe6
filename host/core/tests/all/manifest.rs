//! skill.toml parsing: total (never panics, whatever the bytes), faithful for valid
//! manifests, and strict where a capability could widen: names, file paths, rules.

use std::path::Path;

use proptest::prelude::*;
use skillhost_core::{FileMode, SkillManifest, SkillName};

const ORIGIN: &str = "skills/x/skill.toml";

fn parse(text: &str) -> Result<SkillManifest, skillhost_core::ManifestError> {
    SkillManifest::parse(text, Path::new(ORIGIN))
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,40}[a-z0-9]"
}

/// A TOML basic string holding `text`.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn header(name: &str) -> String {
    format!("name = {}\nversion = \"0.1.0\"\ndescription = \"d\"\n", quoted(name))
}

/// A relative path that stays inside the data dir.
fn inside_path() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "reports", ".", "x-y", "2026"]).prop_map(str::to_owned), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes: an error or a manifest, never a panic; errors name the file.
    #[test]
    fn parsing_arbitrary_bytes_is_total(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Err(e) = SkillManifest::parse_bytes(&bytes, Path::new(ORIGIN)) {
            prop_assert!(e.to_string().starts_with(ORIGIN));
        }
    }

    /// Arbitrary text after a valid header: never a panic, and a position (when given)
    /// points inside the text.
    #[test]
    fn parsing_arbitrary_toml_is_total(tail in "\\PC{0,200}") {
        let text = format!("{}{tail}", header("demo"));
        if let Err(e) = parse(&text)
            && let Some((line, col)) = e.position
        {
            prop_assert!(line >= 1 && col >= 1 && line <= text.lines().count().max(1) + 1, "{:?}", e.position);
        }
    }

    /// A valid manifest keeps what it says: name, description, keywords, example queries,
    /// file capabilities (normalised) and network rules.
    #[test]
    fn valid_manifests_round_trip(
        name in name(),
        description in "[A-Za-z][A-Za-z0-9 ,.'-]{0,200}",
        keywords in prop::collection::vec("[a-z]{1,10}", 0..5),
        queries in prop::collection::vec("[a-z ?]{1,30}", 0..3),
        path in inside_path(),
        writable in any::<bool>(),
        hosts in prop::collection::vec("[a-z]{1,8}\\.(com|org|dev)", 0..3),
    ) {
        let list = |items: &[String]| items.iter().map(|s| quoted(s)).collect::<Vec<_>>().join(", ");
        let rules: Vec<String> = hosts.iter().map(|h| format!("https://{h}")).collect();
        let mode = if writable { "rw" } else { "ro" };
        let mut text = format!(
            "name = {}\nversion = \"1.2.3\"\ndescription = {}\n[search]\nkeywords = [{}]\nexample_queries = [{}]\n[[capabilities.files]]\npath = {}\nmode = \"{mode}\"\n",
            quoted(&name), quoted(&description), list(&keywords), list(&queries), quoted(&path.join("/")),
        );
        if !rules.is_empty() {
            text.push_str(&format!("[network]\nallow = [{}]\n", list(&rules)));
        }
        let manifest = parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(manifest.name.as_str(), name.as_str());
        prop_assert_eq!(manifest.description, description.trim());
        prop_assert_eq!(manifest.search.keywords, keywords);
        prop_assert_eq!(manifest.search.example_queries, queries);
        let expected: Vec<&String> = path.iter().filter(|p| *p != ".").collect();
        let expected = if expected.is_empty() { ".".to_owned() } else { expected.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("/") };
        prop_assert_eq!(&manifest.files[0].path, &expected);
        prop_assert_eq!(manifest.files[0].mode, if writable { FileMode::ReadWrite } else { FileMode::ReadOnly });
        prop_assert_eq!(manifest.network.allow.iter().map(|r| r.text.clone()).collect::<Vec<_>>(), rules);
    }

    /// A name outside `[a-z][a-z0-9-]*[a-z0-9]` is refused, with the name in the message.
    #[test]
    fn invalid_names_are_refused(name in "\\PC{0,70}") {
        let valid = SkillName::new(name.clone()).is_ok();
        let by_rule = (2..=64).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.ends_with('-')
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        prop_assert_eq!(valid, by_rule, "{:?}", name);
        match parse(&header(&name)) {
            Ok(m) => prop_assert!(by_rule, "accepted {:?}", m.name),
            Err(e) => {
                prop_assert!(!by_rule, "{}", e);
                prop_assert!(e.to_string().contains("name"), "{}", e);
            }
        }
    }

    /// A file capability that is absolute or climbs out with `..` anywhere is refused,
    /// however it is dressed up (`./`, doubled slashes, trailing slash).
    #[test]
    fn file_paths_cannot_leave_the_data_dir(
        before in inside_path(),
        after in inside_path(),
        absolute in any::<bool>(),
        slashes in prop::sample::select(vec!["/", "//", "/./"]),
    ) {
        let escape = if absolute { format!("/{}", before.join(slashes)) } else { format!("{}{slashes}..{slashes}{}", before.join(slashes), after.join("/")) };
        let text = format!("{}[[capabilities.files]]\npath = {}\nmode = \"rw\"\n", header("demo"), quoted(&escape));
        let err = parse(&text).expect_err(&escape);
        prop_assert!(err.to_string().contains("file capability path"), "{}", err);
    }

    /// A network rule with userinfo, a path or a bare `*` never parses into a manifest.
    #[test]
    fn bad_network_rules_are_refused(host in "[a-z]{1,8}\\.com", user in "[a-z]{1,5}", path in "[a-z]{1,5}") {
        for rule in [format!("https://{user}@{host}"), format!("https://{host}/{path}"), "https://*".to_owned(), format!("https://*{host}")] {
            let text = format!("{}[network]\nallow = [{}]\n", header("demo"), quoted(&rule));
            let err = parse(&text).expect_err(&rule);
            prop_assert!(err.to_string().contains(&rule), "{}", err);
        }
    }
}
