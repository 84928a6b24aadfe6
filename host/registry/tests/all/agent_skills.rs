//! SKILL.md to the Agent Skills specification, through the registry: each broken rule
//! is listed on its skill with the file, the value and the fix, the other skills load,
//! and the parsed frontmatter is on the catalog entry.

use fixtures::LIMITS;
use skillhost_registry::{RegistryError, Rule, TrustState};

use crate::Env;

fn skill_md(dir: &std::path::Path, folder: &str, frontmatter: &str) {
    let folder = dir.join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("SKILL.md"), format!("---\n{frontmatter}---\n# Body\n")).unwrap();
}

fn rule_of(error: Option<&RegistryError>) -> Option<Rule> {
    match error? {
        RegistryError::Rule(e) => Some(e.rule),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_rules_are_listed_and_the_rest_loads() {
    let env = Env::new();
    skill_md(
        env.ws(),
        "pdf-tools",
        "name: pdf-tools\ndescription: Extract text from PDFs.\nlicense: Apache-2.0\ncompatibility: needs poppler-utils\nmetadata:\n  author: ada\nallowed-tools: Bash(pdftotext:*) Read\nx-vendor: ignored\n",
    );
    skill_md(env.ws(), "foo-bar", "name: Foo_Bar\ndescription: d\n");
    skill_md(env.ws(), "notes", "name: other-notes\ndescription: d\n");
    skill_md(env.ws(), "long-description", &format!("name: long-description\ndescription: {}\n", "x".repeat(1025)));
    skill_md(env.ws(), "bad-metadata", "name: bad-metadata\ndescription: d\nmetadata:\n  version: 2\n");
    let mut laughs = String::from("name: laughs\ndescription: d\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..12 {
        laughs.push_str(&format!("l{i}: &l{i} [{}]\n", vec![format!("*l{}", i - 1); 10].join(", ")));
    }
    skill_md(env.ws(), "laughs", &laughs);
    // A code skill's SKILL.md must name the skill too.
    let limits = LIMITS.folder(env.ws());
    std::fs::write(limits.join("SKILL.md"), "---\nname: limit\ndescription: d\n---\n").unwrap();

    let registry = env.open().await;
    let names: Vec<String> = registry.catalog().iter().map(|e| e.name.to_string()).collect();
    assert_eq!(names, ["bad-metadata", "foo-bar", "laughs", "limits", "long-description", "notes", "pdf-tools"]);

    let pdf = registry.entry("pdf-tools").unwrap();
    assert_eq!(pdf.state, TrustState::Approved, "{:?}", pdf.error);
    let fm = pdf.loaded.as_ref().unwrap().frontmatter.as_ref().expect("frontmatter on the entry");
    assert_eq!(fm.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(fm.compatibility.as_deref(), Some("needs poppler-utils"));
    assert_eq!(fm.metadata.get("author").map(String::as_str), Some("ada"));
    assert_eq!(fm.allowed_tools, ["Bash(pdftotext:*)", "Read"]);
    assert_eq!(fm.unknown_keys, ["x-vendor"], "an unknown key is a warning, not a failure");

    for (name, rule, text) in [
        (
            "foo-bar",
            Rule::NameCharset,
            "foo-bar/SKILL.md: name \"Foo_Bar\" breaks agent-skills rule name-charset (lowercase letters, digits and single hyphens); rename the folder and the name to \"foo-bar\"",
        ),
        (
            "notes",
            Rule::NameFolder,
            "notes/SKILL.md: name \"other-notes\" (the skill is named \"notes\") breaks agent-skills rule name-folder",
        ),
        ("long-description", Rule::DescriptionLength, "description (1025 characters) breaks agent-skills rule description-length"),
        ("bad-metadata", Rule::Metadata, "metadata.version (number 2) breaks agent-skills rule metadata"),
        ("laughs", Rule::FrontmatterYaml, "repetition limit exceeded"),
        ("limits", Rule::NameFolder, "limits/SKILL.md: name \"limit\" (the skill is named \"limits\")"),
    ] {
        let entry = registry.entry(name).unwrap();
        assert!(entry.loaded.is_none(), "{name} must not load");
        let error = entry.error.as_deref();
        assert_eq!(rule_of(error), Some(rule), "{name}: {error:?}");
        let text_of = error.unwrap().to_string();
        assert!(text_of.contains(text), "{name}: {text_of}");
    }

    // Fixed on disk, the skill loads on the next scan.
    skill_md(env.ws(), "foo-bar", "name: foo-bar\ndescription: d\n");
    drop(registry);
    let registry = env.open().await;
    assert!(registry.entry("foo-bar").unwrap().loaded.is_some());
}
