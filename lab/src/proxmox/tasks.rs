//! Worker tasks and their UPIDs (`research/proxmox.md` §3.9–3.10): every power action returns a
//! UPID at once; the task is `running` for a while, then `stopped` with an `exitstatus`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// A decoded UPID: `UPID:node:PID:PSTART:STARTTIME:type:id:user:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upid {
    pub node: String,
    pub pid: u32,
    pub pstart: u64,
    pub starttime: u64,
    pub worker_type: String,
    pub id: String,
    /// `user@realm` or `user@realm!tokenid`.
    pub user: String,
}

impl Upid {
    /// Encodes with upper-case hex and the trailing colon, as Proxmox does.
    pub fn encode(&self) -> String {
        format!(
            "UPID:{}:{:08X}:{:08X}:{:08X}:{}:{}:{}:",
            self.node, self.pid, self.pstart, self.starttime, self.worker_type, self.id, self.user
        )
    }

    /// Decodes either hex case; `None` when the text is not a UPID.
    pub fn parse(text: &str) -> Option<Upid> {
        let rest = text.strip_prefix("UPID:")?.strip_suffix(':')?;
        let parts: Vec<&str> = rest.split(':').collect();
        let [node, pid, pstart, starttime, worker_type, id, user] = parts.as_slice() else {
            return None;
        };
        let hex = |s: &str, lens: &[usize]| -> Option<u64> {
            if !lens.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u64::from_str_radix(s, 16).ok()
        };
        let valid_node = !node.is_empty()
            && node.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !node.starts_with('-')
            && !node.ends_with('-');
        let no_space = |s: &str| !s.contains(char::is_whitespace) && !s.contains('/');
        if !valid_node
            || worker_type.is_empty()
            || user.is_empty()
            || ![worker_type, id, user].iter().all(|s| no_space(s))
        {
            return None;
        }
        Some(Upid {
            node: node.to_string(),
            pid: u32::try_from(hex(pid, &[8])?).ok()?,
            pstart: hex(pstart, &[8, 9])?,
            starttime: hex(starttime, &[8])?,
            worker_type: worker_type.to_string(),
            id: id.to_string(),
            user: user.to_string(),
        })
    }
}

/// State of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub upid: Upid,
    /// `None` while running; the exit status (`OK` or the error text) once stopped.
    pub exitstatus: Option<String>,
    /// Task log lines, ending with `TASK OK` / `TASK ERROR: …` once stopped.
    pub log: Vec<String>,
    /// Unix seconds when it stopped.
    pub endtime: Option<u64>,
}

/// All tasks of the cluster, keyed by encoded UPID.
#[derive(Debug)]
pub struct TaskTable {
    tasks: Mutex<HashMap<String, Task>>,
    next_pid: AtomicU32,
}

impl Default for TaskTable {
    fn default() -> Self {
        Self {
            tasks: Mutex::new(HashMap::new()),
            // Realistic-looking worker PIDs.
            next_pid: AtomicU32::new(0x0003_1000),
        }
    }
}

impl TaskTable {
    /// Registers a running task and returns its UPID.
    pub fn start(
        &self,
        node: &str,
        pstart: u64,
        worker_type: &str,
        id: &str,
        user: &str,
        first_log_line: Option<String>,
    ) -> Upid {
        let pid = self.next_pid.fetch_add(7, Ordering::Relaxed);
        let starttime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let upid = Upid {
            node: node.to_string(),
            pid,
            pstart,
            starttime,
            worker_type: worker_type.to_string(),
            id: id.to_string(),
            user: user.to_string(),
        };
        let task = Task {
            upid: upid.clone(),
            exitstatus: None,
            log: first_log_line.into_iter().collect(),
            endtime: None,
        };
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.insert(upid.encode(), task);
        }
        upid
    }

    /// Marks a task stopped: `Ok` gives `TASK OK`, `Err(text)` gives `TASK ERROR: text`.
    pub fn finish(&self, upid: &Upid, result: Result<(), String>) {
        let Ok(mut tasks) = self.tasks.lock() else {
            return;
        };
        let Some(task) = tasks.get_mut(&upid.encode()) else {
            return;
        };
        task.endtime = Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
                .max(task.upid.starttime),
        );
        match result {
            Ok(()) => {
                task.log.push("TASK OK".into());
                task.exitstatus = Some("OK".into());
            }
            Err(text) => {
                // Proxmox replaces newlines of the error with spaces in the exit status.
                let text = text.trim_end().replace('\n', " ");
                task.log.push(text.clone());
                task.log.push(format!("TASK ERROR: {text}"));
                task.exitstatus = Some(text);
            }
        }
    }

    /// The tasks that ran on `node`, newest first (as `/nodes/{node}/tasks` orders them).
    pub fn on_node(&self, node: &str) -> Vec<Task> {
        let Ok(tasks) = self.tasks.lock() else {
            return Vec::new();
        };
        let mut list: Vec<Task> = tasks
            .values()
            .filter(|t| t.upid.node == node)
            .cloned()
            .collect();
        list.sort_by_key(|t| std::cmp::Reverse((t.upid.starttime, t.upid.pid)));
        list
    }

    /// A copy of the task with this (encoded or not upper-cased) UPID.
    pub fn get(&self, upid: &Upid) -> Option<Task> {
        self.tasks.lock().ok()?.get(&upid.encode()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upid_round_trips_and_accepts_lower_case_hex() {
        let text = "UPID:x:000039C6:1FE23176:619510B1:qmconfig:113:terraform-prov@pve:";
        let upid = Upid::parse(text).expect("parses");
        assert_eq!(upid.pid, 14790);
        assert_eq!(upid.pstart, 534_917_494);
        assert_eq!(upid.starttime, 1_637_159_089);
        assert_eq!(upid.encode(), text);
        let lower = Upid::parse(&text.to_lowercase().replace("upid:", "UPID:")).expect("lower");
        assert_eq!(lower.pid, 14790);
    }

    #[test]
    fn upid_accepts_nine_digit_pstart_and_empty_id() {
        let upid = Upid::parse("UPID:pve1:00001234:1FE231760:619510B1:startall::root@pam:")
            .expect("parses");
        assert_eq!(upid.id, "");
        assert_eq!(upid.pstart, 0x1_FE23_1760);
    }

    #[test]
    fn malformed_upids_are_rejected() {
        for bad in [
            "",
            "UPID:pve1:1234:1FE23176:619510B1:qmstop:100:root@pam:",
            "UPID:pve1:00001234:1FE23176:619510B1:qmstop:100:root@pam",
            "UPID:-pve:00001234:1FE23176:619510B1:qmstop:100:root@pam:",
            "UPID:pve1:0000123G:1FE23176:619510B1:qmstop:100:root@pam:",
            "UPID:pve1:00001234:1FE23176:619510B1:qmstop:100::",
        ] {
            assert!(Upid::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn tasks_run_then_stop_with_exit_status_and_log() {
        let table = TaskTable::default();
        let ok = table.start("pve1", 100, "qmstop", "100", "gates@pve!lab", None);
        let bad = table.start("pve1", 100, "qmstart", "101", "gates@pve!lab", None);
        assert_eq!(table.get(&ok).expect("task").exitstatus, None);
        table.finish(&ok, Ok(()));
        table.finish(&bad, Err("VM 101 already running\n".into()));
        let ok = table.get(&ok).expect("task");
        assert_eq!(ok.exitstatus.as_deref(), Some("OK"));
        assert_eq!(ok.log.last().map(String::as_str), Some("TASK OK"));
        let bad = table.get(&bad).expect("task");
        assert_eq!(bad.exitstatus.as_deref(), Some("VM 101 already running"));
        assert_eq!(
            bad.log.last().map(String::as_str),
            Some("TASK ERROR: VM 101 already running")
        );
    }
}
