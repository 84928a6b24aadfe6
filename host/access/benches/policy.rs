//! The org policy's cost per decision: one `call` decided against a set of 1 policy (the
//! baseline) and of 100 (a team's: per-group permits on tools and skills, and forbids),
//! the same for a caller not seen before (its slice of the set made, not kept), and a
//! `tools/list` of 50 tools filtered for one caller at 100 policies.

#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use skillhost_access::{Action, Caller, OrgPolicy, Target, Via};

/// `n` policies: permits of a group's calls to one skill's tools, reads of a skill, and a
/// forbid every tenth; the last permits the benchmark's caller.
fn policies(n: usize) -> OrgPolicy {
    let mut text = String::new();
    for i in 0..n.saturating_sub(1) {
        text.push_str(&match i % 10 {
            0 => format!("forbid(principal in Group::\"g{i}\", action, resource == Tool::\"s{i}__write\");\n"),
            1..=4 => format!("permit(principal in Group::\"g{i}\", action == Action::\"call\", resource in Skill::\"s{i}\");\n"),
            5..=7 => format!("permit(principal == Caller::\"c{i}\", action == Action::\"call\", resource == Tool::\"s{i}__read\");\n"),
            _ => format!(
                "permit(principal in Group::\"g{i}\", action in [Action::\"list\", Action::\"read\"], resource == Skill::\"s{i}\");\n"
            ),
        });
    }
    text.push_str("permit(principal in Group::\"agents\", action == Action::\"call\", resource in Skill::\"notes\");\n");
    OrgPolicy::from_files(Path::new("bench"), &[(PathBuf::from("bench.cedar"), text)]).expect("the benchmark's policies validate")
}

fn decide(c: &mut Criterion) {
    let caller = Caller { name: "agent-7".into(), groups: vec!["agents".into(), "g3".into()], via: Via::Token, scopes: Vec::new() };
    let read = Target::Tool { skill: "notes", tool: "read", public: "notes__read" };
    let mut group = c.benchmark_group("org policy");
    for n in [1, 100] {
        let policy = policies(n);
        assert!(policy.decide(&caller, Action::Call, &read).allowed);
        group.bench_function(format!("decide one call, {n} policies"), |b| b.iter(|| policy.decide(&caller, Action::Call, &read)));
    }
    let policy = policies(100);
    let mut seen = 0_u64;
    group.bench_function("decide one call of a caller not seen before, 100 policies", |b| {
        b.iter_batched(
            || {
                seen += 1;
                Caller { name: format!("agent-{seen}"), ..caller.clone() }
            },
            |new| policy.decide(&new, Action::Call, &read),
            BatchSize::SmallInput,
        )
    });
    let tools: Vec<(String, String)> = (0..50).map(|i| (format!("s{}", i % 10), format!("s{}__t{i}", i % 10))).collect();
    group.bench_function("filter a tools/list of 50 tools, 100 policies", |b| {
        b.iter(|| {
            tools
                .iter()
                .filter(|(skill, public)| policy.decide(&caller, Action::Call, &Target::Tool { skill, tool: "t", public }).allowed)
                .count()
        })
    });
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
