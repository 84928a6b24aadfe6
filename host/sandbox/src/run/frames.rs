//! The framing between the host and a run's init over its stdin and stdout: each frame
//! is a kind byte, a little-endian `u32` length and that many bytes (at most
//! [`MAX_FRAME`]). The host writes the input files (`File`, `Executable` for one that
//! is, then `Data`s) and closes stdin; the init writes the command's output as it comes
//! (`Stdout`, `Stderr`), then the workspace's files the same way, the entries it left
//! out, and `Exit` last.
//!
//! Everything the init sends is the skill's data: the host reads it under the run's caps
//! and checks every path again.

use std::io::{self, Read, Write};

/// The largest frame payload.
pub const MAX_FRAME: usize = 64 * 1024;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A file starts: its relative path, UTF-8.
    File = 1,
    /// Bytes of the file last started.
    Data = 2,
    /// Bytes the command printed on stdout.
    Stdout = 3,
    /// Bytes the command printed on stderr.
    Stderr = 4,
    /// An entry of the workspace left out, and why: one line of text.
    Skipped = 5,
    /// How the command ended, JSON ([`Exit`]); the last frame.
    Exit = 6,
    /// The init itself failed (an input it could not write, a command it could not
    /// start): one line of text.
    Error = 7,
    /// The file last started is executable (no payload).
    Executable = 8,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Kind::File,
            2 => Kind::Data,
            3 => Kind::Stdout,
            4 => Kind::Stderr,
            5 => Kind::Skipped,
            6 => Kind::Exit,
            7 => Kind::Error,
            8 => Kind::Executable,
            _ => return None,
        })
    }
}

/// How the command ended, and what its workspace used.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Exit {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Bytes the workspace's file system used at the end.
    pub used: u64,
    /// Its size.
    pub size: u64,
}

/// Write one frame (a payload longer than [`MAX_FRAME`] is split by the caller).
pub fn write(out: &mut impl Write, kind: Kind, payload: &[u8]) -> io::Result<()> {
    debug_assert!(payload.len() <= MAX_FRAME);
    let mut header = [0u8; 5];
    header[0] = kind as u8;
    header[1..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    out.write_all(&header)?;
    out.write_all(payload)
}

/// Write `bytes` as frames of `kind`, [`MAX_FRAME`] at a time.
pub fn write_chunked(out: &mut impl Write, kind: Kind, bytes: &[u8]) -> io::Result<()> {
    for chunk in bytes.chunks(MAX_FRAME) {
        write(out, kind, chunk)?;
    }
    Ok(())
}

fn header_of(header: [u8; 5]) -> io::Result<(Kind, usize)> {
    let kind = Kind::from_byte(header[0]).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unknown frame kind"))?;
    let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "a frame is longer than allowed"));
    }
    Ok((kind, len))
}

/// Read one frame: `None` at a clean end of stream; an error for a partial or malformed
/// frame.
pub fn read(input: &mut impl Read) -> io::Result<Option<(Kind, Vec<u8>)>> {
    let mut header = [0u8; 5];
    let mut got = 0;
    while got < header.len() {
        match input.read(&mut header[got..])? {
            0 if got == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a frame was cut short")),
            n => got += n,
        }
    }
    let (kind, len) = header_of(header)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload)?;
    Ok(Some((kind, payload)))
}

/// [`read`] from an async reader.
pub async fn read_async(input: &mut (impl tokio::io::AsyncRead + Unpin)) -> io::Result<Option<(Kind, Vec<u8>)>> {
    use tokio::io::AsyncReadExt;
    let mut header = [0u8; 5];
    let mut got = 0;
    while got < header.len() {
        match input.read(&mut header[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a frame was cut short")),
            n => got += n,
        }
    }
    let (kind, len) = header_of(header)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await?;
    Ok(Some((kind, payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_damage() {
        let mut buf = Vec::new();
        write(&mut buf, Kind::File, b"out/a.txt").unwrap();
        write_chunked(&mut buf, Kind::Data, &vec![7u8; MAX_FRAME + 3]).unwrap();
        let mut input = &buf[..];
        assert_eq!(read(&mut input).unwrap(), Some((Kind::File, b"out/a.txt".to_vec())));
        assert_eq!(read(&mut input).unwrap().unwrap().1.len(), MAX_FRAME);
        assert_eq!(read(&mut input).unwrap().unwrap().1.len(), 3);
        assert_eq!(read(&mut input).unwrap(), None);
        let mut cut = &buf[..3];
        assert!(read(&mut cut).is_err());
        let mut long = &[2u8, 0, 0, 2, 0][..];
        assert!(read(&mut long).is_err(), "a length above the cap is refused before reading it");
        let mut unknown = &[9u8, 0, 0, 0, 0][..];
        assert!(read(&mut unknown).is_err());
    }
}
