//! Kubernetes quantities for the scenario's CPU and memory values, and back to strings.

/// CPU in millicores from "2", "500m", "1.5", "250000n".
pub fn cpu_milli(q: &str) -> Result<i64, String> {
    let q = q.trim();
    let bad = || format!("bad CPU quantity {q:?}");
    if let Some(n) = q.strip_suffix('m') {
        return n.parse::<i64>().map_err(|_| bad());
    }
    if let Some(n) = q.strip_suffix('n') {
        return n
            .parse::<i64>()
            .map(|v| (v + 999_999) / 1_000_000)
            .map_err(|_| bad());
    }
    q.parse::<f64>()
        .map(|v| (v * 1000.0).round() as i64)
        .map_err(|_| bad())
}

/// Memory in bytes from "7Gi", "128Mi", "1000k", "1e9", "512".
pub fn bytes(q: &str) -> Result<i64, String> {
    let q = q.trim();
    let bad = || format!("bad memory quantity {q:?}");
    const UNITS: &[(&str, i64)] = &[
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, mult) in UNITS {
        if let Some(n) = q.strip_suffix(suffix) {
            return n
                .parse::<f64>()
                .map(|v| (v * *mult as f64) as i64)
                .map_err(|_| bad());
        }
    }
    q.parse::<f64>().map(|v| v as i64).map_err(|_| bad())
}

pub fn cpu_string(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Memory as Ki, the way the kubelet reports capacity.
pub fn mem_string(bytes: i64) -> String {
    if bytes % (1 << 30) == 0 {
        format!("{}Gi", bytes >> 30)
    } else if bytes % (1 << 20) == 0 {
        format!("{}Mi", bytes >> 20)
    } else {
        format!("{}Ki", bytes / 1024)
    }
}

/// CPU usage as metrics-server prints it: nanocores.
pub fn cpu_nano_string(milli: i64) -> String {
    format!("{}n", milli * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!(cpu_milli("2").expect("ok"), 2000);
        assert_eq!(cpu_milli("250m").expect("ok"), 250);
        assert_eq!(cpu_milli("1500000n").expect("ok"), 2);
        assert_eq!(bytes("7Gi").expect("ok"), 7 << 30);
        assert_eq!(bytes("1k").expect("ok"), 1000);
        assert!(bytes("lots").is_err());
        assert_eq!(cpu_string(1950), "1950m");
        assert_eq!(mem_string(128 << 20), "128Mi");
    }
}
