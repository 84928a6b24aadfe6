//! Property tests (proptest) for the parts of skillhost-core that stand between a skill
//! and the outside world: egress rule matching, URL normalisation and manifest parsing.
//! Each property states what must never happen, and the generators include the forms
//! attackers use (case, trailing dots, IP encodings, userinfo, suffix tricks).

mod egress;
mod manifest;
