//! Deterministic identifiers (uids, pod name suffixes, etcd member ids) derived from names,
//! so that one scenario always produces the same objects.

/// 64-bit FNV-1a, then a SplitMix64 finaliser for a good spread of bits.
pub fn hash64(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID (lowercase) derived from the parts.
pub fn uuid(parts: &[&str]) -> String {
    let a = hash64(parts);
    let b = hash64(&[&a.to_string(), "uuid"]);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (a >> 32) as u32,
        (a >> 16) as u16,
        (a & 0x0fff) as u16,
        ((b >> 48) as u16 & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// The alphabet Kubernetes uses for generated name suffixes (no vowels, no confusables).
const ALPHANUM: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A generated-name suffix of `len` characters, like `7d9f8` in `coredns-7d9f8b6c5-x2k4p`.
pub fn suffix(parts: &[&str], len: usize) -> String {
    let mut h = hash64(parts);
    let mut out = String::with_capacity(len);
    for i in 0..len {
        if i > 0 && i % 12 == 0 {
            h = hash64(&[&h.to_string()]);
        }
        out.push(ALPHANUM[(h % ALPHANUM.len() as u64) as usize] as char);
        h /= ALPHANUM.len() as u64;
    }
    out
}

/// A random secret (hex) from the system's CSPRNG, for bearer tokens.
pub fn secret_hex(bytes: usize) -> Result<String, ring::error::Unspecified> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new().fill(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(uuid(&["a"]), uuid(&["a"]));
        assert_ne!(uuid(&["a"]), uuid(&["b"]));
        assert_eq!(uuid(&["a"]).len(), 36);
        assert_eq!(suffix(&["x"], 5).len(), 5);
        assert_ne!(secret_hex(16).expect("rng"), secret_hex(16).expect("rng"));
    }
}
