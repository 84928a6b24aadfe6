//! The wasmtime engines skillhost runs components on: pooling allocator, epoch
//! interruption driven by a ticker thread, and the fingerprint that keys compiled code.
//! Cranelift's engine runs what is cached or compiled for good; Winch's (the baseline
//! compiler) runs a component's first calls while Cranelift compiles it.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use crate::WasmConfig;

/// Build the engine for `config`: Cranelift's, or with `baseline` Winch's (the same
/// settings otherwise). With [`WasmConfig::baseline_compile`], Cranelift compiles in the
/// background while Winch's code serves: on one thread, so that it never takes the
/// cores (wasmtime's parallel compilation shares one thread pool between engines) from
/// the Winch compiles and the calls that someone is waiting for. The engine's
/// configuration comes with it: an engine made from it compiles code the first runs.
pub(crate) fn build(config: &WasmConfig, baseline: bool) -> wasmtime::Result<(Engine, Config)> {
    let wasm = wasmtime_config(config, baseline);
    Ok((Engine::new(&wasm)?, wasm))
}

/// The engine for `config` that only compiles (a compile worker's), with Winch when
/// `baseline` else Cranelift: the same compilation settings as [`build`]'s, so its code
/// loads in that engine (wasmtime checks), without the pooling allocator, whose pools
/// (hundreds of MB of tables) it never uses.
pub(crate) fn compiler(config: &WasmConfig, baseline: bool) -> wasmtime::Result<Engine> {
    let mut wasm = wasmtime_config(config, baseline);
    wasm.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    Engine::new(&wasm)
}

/// The configuration of [`build`]'s engine.
fn wasmtime_config(config: &WasmConfig, baseline: bool) -> Config {
    let n = config.max_instances.max(1);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(16))
        .total_memories(n.saturating_mul(2))
        .total_tables(n.saturating_mul(4))
        .total_stacks(n)
        .max_memory_size(usize::try_from(config.max_memory).unwrap_or(usize::MAX))
        .table_elements(100_000)
        // Reset small regions with memset instead of madvise, and keep those pages
        // resident: a fresh instance per call makes instance churn the hot path.
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);

    let mut wasm = Config::new();
    wasm.epoch_interruption(true)
        .cranelift_opt_level(if config.optimize { OptLevel::Speed } else { OptLevel::None })
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    if baseline {
        wasm.strategy(wasmtime::Strategy::Winch);
    } else if config.baseline_compile {
        wasm.parallel_compilation(false);
    }
    wasm
}

/// A stable digest of everything about `engine` that makes compiled code incompatible:
/// wasmtime's version, target and compilation settings.
pub(crate) fn fingerprint(engine: &Engine) -> String {
    let mut hasher = DigestHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..16])
}

/// Feeds `Hash` output into SHA-256, so the fingerprint does not depend on std's hasher.
struct DigestHasher(Sha256);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().expect("sha256 is 32 bytes"))
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Advance the engine's epoch every `tick` for as long as the engine lives.
pub(crate) fn start_ticker(engine: &Engine, tick: Duration) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("skillhost-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(tick);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .expect("spawning the epoch thread");
}
