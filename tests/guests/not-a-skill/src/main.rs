//! A component of another world (`wasi:cli/command`): a plain `fn main`
//! program with no skill exports. The host's tests load it to check that a
//! component that is not a skill is refused with a clear load error.

#[allow(clippy::print_stdout)]
fn main() {
    println!("not a skill");
}
