//! A skill's folder as the one archive layout skillhost publishes ([`pack_tar_gz`]):
//! deterministic bytes, so the same files always give the same digest. It serves both an
//! OCI skill layer (skillhost-source) and a well-known index's `archive` entries
//! ([`wellknown`](crate::wellknown)); reading archives back is skillhost-source's, under its
//! archive rules.

use std::collections::BTreeMap;

/// `files` as a gzip-compressed tar: sorted, mode 0644, owner 0, time 0, so the same files
/// always give the same bytes (and the same digest).
pub fn pack_tar_gz(files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let gzip = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gzip);
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        // Writing into a Vec cannot fail; a path the tar format cannot hold (never one of a
        // skill's plain relative paths) would.
        tar.append_data(&mut header, path, bytes.as_slice()).expect("a plain relative path packs into a Vec");
    }
    let gzip = tar.into_inner().expect("a tar into a Vec");
    gzip.finish().expect("gzip into a Vec")
}
