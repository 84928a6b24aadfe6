//! Egress rules and URL normalisation: a rule never matches a host it should not, and
//! every spelling of one host normalises to the same target.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use skillhost_core::egress::{Denial, EgressPolicy, NetworkSection, Rule, TargetHost, normalise};

fn label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,7}"
}

/// A lowercase DNS name of two to four labels.
fn domain() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 2..=4).prop_map(|labels| labels.join("."))
}

/// `name` with the letters at the chosen positions upper-cased.
fn mixed_case(name: &str, mask: u64) -> String {
    name.chars().enumerate().map(|(i, c)| if mask >> (i % 64) & 1 == 1 { c.to_ascii_uppercase() } else { c }).collect()
}

fn target_host(url: &str) -> TargetHost {
    normalise(url).unwrap_or_else(|e| panic!("{url} should normalise: {e}")).host
}

fn matches(rule: &str, url: &str) -> bool {
    let rule = Rule::parse(rule).unwrap_or_else(|e| panic!("{e}"));
    normalise(url).is_ok_and(|target| rule.matches(&target))
}

fn policy(allow: &[String], deny: &[String]) -> EgressPolicy {
    let section = NetworkSection { allow: allow.to_vec(), deny: deny.to_vec(), private: vec![] };
    EgressPolicy::from_section(&section).expect("valid rules")
}

/// Prefix bits compared as text: an implementation independent of the one under test.
fn same_prefix(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    let bits = |ip: Ipv4Addr| format!("{:032b}", u32::from(ip));
    bits(a)[..usize::from(prefix)] == bits(b)[..usize::from(prefix)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An exact-name rule matches its host in any case and with a trailing dot, and no
    /// other host, including the name with a label added before or after it.
    #[test]
    fn a_name_rule_matches_only_its_host(host in domain(), other in domain(), mask in any::<u64>(), extra in label()) {
        let rule = format!("https://{host}");
        prop_assert!(matches(&rule, &format!("https://{}/x", mixed_case(&host, mask))), "property failed for the inputs above");
        prop_assert!(matches(&rule, &format!("https://{host}./x")), "property failed for the inputs above");
        prop_assert_eq!(matches(&rule, &format!("https://{other}/")), other == host);
        prop_assert!(!matches(&rule, &format!("https://{extra}.{host}/")), "property failed for the inputs above");
        prop_assert!(!matches(&rule, &format!("https://{host}.{extra}/")), "property failed for the inputs above");
        prop_assert!(!matches(&rule, &format!("https://{extra}{host}/")), "property failed for the inputs above");
    }

    /// `*.parent` matches strict subdomains only: never the parent itself, never a name
    /// that merely ends with the parent's text (`evilparent.com`), never the parent used
    /// as a prefix (`parent.com.evil.net`).
    #[test]
    fn a_wildcard_reaches_only_subdomains(parent in domain(), sub in label(), other in domain(), evil in domain()) {
        let rule = format!("https://*.{parent}");
        prop_assert!(matches(&rule, &format!("https://{sub}.{parent}/")), "property failed for the inputs above");
        prop_assert!(matches(&rule, &format!("https://{sub}.{sub}.{parent}/")), "property failed for the inputs above");
        prop_assert!(!matches(&rule, &format!("https://{parent}/")), "property failed for the inputs above");
        prop_assert!(!matches(&rule, &format!("https://{sub}{parent}/")), "property failed for the inputs above");
        prop_assert!(!matches(&rule, &format!("https://{parent}.{evil}/")), "property failed for the inputs above");
        prop_assert_eq!(matches(&rule, &format!("https://{other}/")), other.ends_with(&format!(".{parent}")));
    }

    /// Scheme and port are part of a rule: another port or plain http never matches.
    #[test]
    fn scheme_and_port_must_match(host in domain(), port in 1u16.., other_port in 1u16..) {
        let rule = format!("https://{host}:{port}");
        prop_assert!(matches(&rule, &format!("https://{host}:{port}/")), "property failed for the inputs above");
        prop_assert_eq!(matches(&rule, &format!("https://{host}:{other_port}/")), other_port == port);
        prop_assert!(!matches(&rule, &format!("http://{host}:{port}/")), "property failed for the inputs above");
        if port != 443 {
            prop_assert!(!matches(&rule, &format!("https://{host}/")), "property failed for the inputs above");
        }
    }

    /// Decimal, hex, octal and dotted spellings of an IPv4 address are one target; a name
    /// rule never matches an IP, and an IP rule matches every spelling of its address only.
    #[test]
    fn ip_encodings_are_one_target(raw in any::<u32>(), other in any::<u32>(), host in domain()) {
        let ip = Ipv4Addr::from(raw);
        let [a, b, c, d] = ip.octets();
        let spellings = [
            format!("http://{ip}/"),
            format!("http://{raw}/"),
            format!("http://0x{raw:x}/"),
            format!("http://0{a:o}.0{b:o}.0{c:o}.0{d:o}/"),
            format!("http://0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}/"),
            format!("http://[::ffff:{ip}]/"),
        ];
        for url in &spellings[..5] {
            prop_assert_eq!(target_host(url), TargetHost::Ip(IpAddr::V4(ip)), "{}", url);
            prop_assert!(matches(&format!("http://{ip}"), url), "property failed for the inputs above");
            prop_assert!(!matches(&format!("http://{host}"), url), "property failed for the inputs above");
            prop_assert_eq!(matches(&format!("http://{}", Ipv4Addr::from(other)), url), other == raw);
        }
        // The IPv4-mapped IPv6 form is a different literal: only an IPv6 rule matches it.
        prop_assert!(!matches(&format!("http://{ip}"), &spellings[5]), "property failed for the inputs above");
    }

    /// A CIDR rule matches exactly the addresses sharing its prefix bits.
    #[test]
    fn cidr_rules_match_their_range(net in any::<u32>(), ip in any::<u32>(), prefix in 0u8..=32) {
        let (net, ip) = (Ipv4Addr::from(net), Ipv4Addr::from(ip));
        let rule = format!("http://{net}/{prefix}");
        prop_assert_eq!(matches(&rule, &format!("http://{ip}/")), same_prefix(net, ip, prefix));
    }

    /// Every textual form of an IPv6 address is one target; zone ids never become a name.
    #[test]
    fn ipv6_literals_are_one_target(raw in any::<u128>(), zone in "[a-z0-9]{1,6}") {
        let ip = Ipv6Addr::from(raw);
        let full = ip.segments().iter().map(|s| format!("{s:04X}")).collect::<Vec<_>>().join(":");
        prop_assert_eq!(target_host(&format!("http://[{ip}]/")), TargetHost::Ip(IpAddr::V6(ip)));
        prop_assert_eq!(target_host(&format!("http://[{full}]/")), TargetHost::Ip(IpAddr::V6(ip)));
        prop_assert!(matches(&format!("http://[{ip}]"), &format!("http://[{full}]/")), "property failed for the inputs above");
        match normalise(&format!("http://[{ip}%25{zone}]/")) {
            Err(_) => {}
            Ok(target) => prop_assert!(matches!(target.host, TargetHost::Ip(_)), "a zone id became {:?}", target.host),
        }
    }

    /// Userinfo is refused before any rule is consulted, even for an allowed host.
    #[test]
    fn userinfo_never_passes(host in domain(), user in "[a-zA-Z0-9]{1,8}", password in proptest::option::of("[a-zA-Z0-9]{1,8}")) {
        let userinfo = match &password { Some(p) => format!("{user}:{p}"), None => user.clone() };
        let url = format!("https://{userinfo}@{host}/");
        let allowed = policy(&[format!("https://{host}")], &[]);
        prop_assert!(matches!(allowed.check_url(&url), Err(Denial::Userinfo { .. })), "{}", url);
    }

    /// A deny rule wins over any allow rule that also matches.
    #[test]
    fn deny_wins(parent in domain(), sub in label()) {
        let allowed = policy(&[format!("https://*.{parent}")], &[format!("https://{sub}.{parent}")]);
        let denied = allowed.check_url(&format!("https://{}/", mixed_case(&format!("{sub}.{parent}"), u64::MAX)));
        prop_assert!(matches!(denied, Err(Denial::DenyRule { .. })), "{:?}", denied);
    }

    /// A homograph (one letter swapped for a non-ASCII lookalike) normalises to punycode
    /// and never matches the rule for the ASCII name, unless IDNA maps it to that very name.
    #[test]
    fn homographs_do_not_match(host in domain(), at in any::<prop::sample::Index>(), glyph in prop::sample::select(vec!['а', 'е', 'о', 'р', 'с', 'ı', 'ⅼ'])) {
        let mut chars: Vec<char> = host.chars().collect();
        let letters: Vec<usize> = (0..chars.len()).filter(|&i| chars[i] != '.').collect();
        chars[letters[at.index(letters.len())]] = glyph;
        let spoof: String = chars.into_iter().collect();
        if let Ok(target) = normalise(&format!("https://{spoof}/")) {
            // IDNA maps compatibility forms (`ⅼ` → `l`): then it *is* the same host.
            let same = target.host == TargetHost::Name(host.clone());
            prop_assert_eq!(Rule::parse(&format!("https://{host}")).unwrap().matches(&target), same, "{} vs {}", spoof, host);
            if let TargetHost::Name(name) = &target.host {
                prop_assert!(name.is_ascii(), "{}", name);
            }
        }
    }

    /// Normalising never panics, and a normalised target normalises to itself.
    #[test]
    fn normalise_is_total_and_idempotent(tail in "\\PC{0,40}", scheme in prop::sample::select(vec!["http://", "https://", "ftp://", ""])) {
        if let Ok(target) = normalise(&format!("{scheme}{tail}")) {
            let again = normalise(&format!("{}{}", target.origin(), target.path_and_query));
            prop_assert_eq!(again.as_ref().ok(), Some(&target));
            if let TargetHost::Name(name) = &target.host {
                prop_assert!(!name.ends_with('.') && *name == name.to_ascii_lowercase(), "{}", name);
            }
        }
    }

    /// Parsing rules never panics; a parsed rule never carries userinfo.
    #[test]
    fn rule_parsing_is_total(text in "\\PC{0,40}") {
        if let Ok(rule) = Rule::parse(&text) {
            prop_assert!(!rule.text.contains('@'));
        }
    }
}
