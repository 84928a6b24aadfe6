//! `skillhost test`: a skill's own tests in a throwaway sandbox.
