//! The workspace's shape, kept: no two files of a crate import each other (directly or
//! through others), and no function outside tests is longer than 100 lines. A circle makes
//! two files one unit that cannot be read, tested or moved apart; a function that long does
//! several things. Both were measured to 0 once (issue 29) and this test keeps them there.
//!
//! The reading is lexical, like the measurement it replaces: comments, strings and test
//! modules are blanked, then every `crate::`, `super::` and `self::` path (with its `{...}`
//! groups) and every path through a child module is an edge to the file that defines the
//! module it names. A directory module that re-exports a name (`pub use child::Name`) stands
//! for the child that defines it, so a façade is not a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 5] = ["core/src", "engine/src", "infra/src", "src", "lab/src"];
const LONGEST: usize = 100;

type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("core/ is inside the workspace")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file
        .strip_prefix(root)
        .expect("under its root")
        .with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The text with comments, string and char literals blanked (newlines kept), cut at the
/// first `#[cfg(test)]`.
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, run: &[char]| {
        out.extend(run.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            let end = rest.iter().position(|&c| c == '\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(&['/', '*']) {
            let end = (2..rest.len())
                .find(|&j| rest[j - 1] == '*' && rest[j] == '/')
                .map_or(rest.len(), |j| j + 1);
            blank(&mut out, &rest[..end]);
            i += end;
        } else if let Some(len) = raw_string(rest, i == 0 || !ident(chars[i - 1])) {
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == '\'' && char_literal(rest).is_some() {
            let len = char_literal(rest).unwrap_or(1);
            blank(&mut out, &rest[..len]);
            i += len;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    match out.find("#[cfg(test)]") {
        Some(at) => out[..at].to_string(),
        None => out,
    }
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The length of a raw string (`r"..."`, `r#"..."#`, `br"..."`) starting here.
fn raw_string(rest: &[char], at_word_start: bool) -> Option<usize> {
    if !at_word_start {
        return None;
    }
    let mut j = usize::from(rest.first() == Some(&'b'));
    if rest.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = rest[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if rest.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < rest.len() {
        if rest[j] == '"'
            && rest[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(rest.len())
}

/// The length of a char literal (`'a'`, `'\n'`, `'\u{1F600}'`), not a lifetime.
fn char_literal(rest: &[char]) -> Option<usize> {
    match rest.get(1..) {
        Some(['\\', 'u', '{', ..]) => rest.iter().position(|&c| c == '}').map(|p| p + 2),
        Some(['\\', _, '\'', ..]) => Some(4),
        Some([c, '\'', ..]) if *c != '\\' => Some(3),
        _ => None,
    }
}

/// Every path the code names, as segment lists, with `{a, b::c}` groups expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if ident(chars[i]) && (i == 0 || !(ident(chars[i - 1]) || chars[i - 1] == ':')) {
            let (text, end) = path_text(&chars, i);
            if text.contains("::") {
                out.extend(expand(&text));
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// A path from `start`: identifiers, `::` and balanced `{...}` groups.
fn path_text(chars: &[char], start: usize) -> (String, usize) {
    let mut text = String::new();
    let mut i = start;
    loop {
        let word_end = (i..chars.len())
            .find(|&j| !ident(chars[j]))
            .unwrap_or(chars.len());
        text.extend(&chars[i..word_end]);
        i = word_end;
        let mut j = i;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if chars.get(j..j + 2) != Some(&[':', ':']) {
            return (text, i);
        }
        text.push_str("::");
        j += 2;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if chars.get(j) == Some(&'{') {
            let mut depth = 0;
            let mut k = j;
            while k < chars.len() {
                match chars[k] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                k += 1;
            }
            text.extend(&chars[j..(k + 1).min(chars.len())]);
            return (text, k + 1);
        }
        if j >= chars.len() || !ident(chars[j]) {
            return (text, j);
        }
        i = j;
    }
}

fn expand(path: &str) -> Vec<Vec<String>> {
    let split = |p: &str| -> Vec<String> {
        p.split("::")
            .map(|s| s.split(" as ").next().unwrap_or("").trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let Some(open) = path.find('{') else {
        return vec![split(path)];
    };
    let (prefix, body) = (&path[..open], &path[open + 1..path.len().saturating_sub(1)]);
    let mut items = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            items.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    items.push(current);
    items
        .iter()
        .map(|item| item.trim())
        .filter(|item| !item.is_empty())
        .flat_map(|item| expand(&format!("{prefix}{item}")))
        .collect()
}

/// Per directory module, the names it re-exports from a child and the child that has them.
fn reexports(code: &str, me: &Module, modules: &BTreeSet<Module>) -> BTreeMap<String, Module> {
    let mut out = BTreeMap::new();
    for line in code.split(';') {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        for path in expand(rest.trim()) {
            let Some((name, from)) = path.split_last() else {
                continue;
            };
            if from.is_empty() || ["crate", "super", "self"].contains(&from[0].as_str()) {
                continue;
            }
            let mut target = me.clone();
            target.extend(from.iter().cloned());
            while !modules.contains(&target) && target.len() > me.len() {
                target.pop();
            }
            if target != *me {
                out.insert(name.clone(), target);
            }
        }
    }
    out
}

struct Graph {
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

impl Graph {
    fn of(root: &Path) -> Graph {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        let sources: BTreeMap<Module, String> = files
            .iter()
            .map(|f| {
                (
                    module_of(root, f),
                    code(&std::fs::read_to_string(f).unwrap()),
                )
            })
            .collect();
        let modules: BTreeSet<Module> = sources.keys().cloned().collect();
        let reexported: BTreeMap<Module, BTreeMap<String, Module>> = sources
            .iter()
            .map(|(m, code)| (m.clone(), reexports(code, m, &modules)))
            .collect();
        let mut edges = BTreeMap::new();
        for (me, code) in &sources {
            let mut to = BTreeSet::new();
            for path in paths(code) {
                if let Some(target) = resolve(me, &path, &modules, &reexported)
                    && target != *me
                    && !(target.len() < me.len() && me.starts_with(&target))
                {
                    to.insert(target);
                }
            }
            edges.insert(me.clone(), to);
        }
        Graph { edges }
    }

    /// The strongly connected components of more than one file (Tarjan).
    fn circles(&self) -> Vec<Vec<Module>> {
        struct Walk<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g Module, usize>,
            low: BTreeMap<&'g Module, usize>,
            stack: Vec<&'g Module>,
            on_stack: BTreeSet<&'g Module>,
            found: Vec<Vec<Module>>,
        }
        impl<'g> Walk<'g> {
            fn visit(&mut self, v: &'g Module) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in &self.graph.edges[v] {
                    if !self.graph.edges.contains_key(w) {
                        continue;
                    }
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        component.push(w.clone());
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        self.found.push(component);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for v in self.edges.keys() {
            if !walk.index.contains_key(v) {
                walk.visit(v);
            }
        }
        walk.found
    }
}

/// The file a path names: the longest module prefix it walks through, followed through the
/// re-exports of a directory module to the child that defines the name.
fn resolve(
    me: &Module,
    path: &[String],
    modules: &BTreeSet<Module>,
    reexported: &BTreeMap<Module, BTreeMap<String, Module>>,
) -> Option<Module> {
    let first = path.first()?;
    let (mut base, rest): (Module, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (me.clone(), &path[1..]),
        "super" => {
            let mut base = me.clone();
            base.pop();
            let mut rest = &path[1..];
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        child if modules.contains(&[me.as_slice(), &[child.to_string()]].concat()) => {
            (me.clone(), path)
        }
        _ => return None,
    };
    let mut best = None;
    let mut walked = 0;
    for segment in rest {
        base.push(segment.clone());
        if !modules.contains(&base) {
            break;
        }
        best = Some(base.clone());
        walked += 1;
    }
    let mut best = best?;
    if let Some(name) = rest.get(walked) {
        while let Some(child) = reexported.get(&best).and_then(|r| r.get(name)) {
            if *child == best {
                break;
            }
            best = child.clone();
        }
    }
    Some(best)
}

/// Every `fn` outside tests longer than [`LONGEST`] lines: (lines, file, name).
fn long_functions(root: &Path) -> Vec<(usize, String, String)> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut out = Vec::new();
    for file in files {
        let shown = file.display().to_string();
        if shown.contains("/tests/")
            || file
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains("test"))
        {
            continue;
        }
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let lines: Vec<&str> = code.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if let Some(name) = fn_name(lines[i]) {
                let (mut depth, mut started, mut j) = (0i32, false, i);
                'body: while j < lines.len() {
                    for c in lines[j].chars() {
                        match c {
                            '{' => {
                                depth += 1;
                                started = true;
                            }
                            '}' => depth -= 1,
                            _ => {}
                        }
                    }
                    if (started && depth == 0) || (!started && lines[j].trim_end().ends_with(';')) {
                        break 'body;
                    }
                    j += 1;
                }
                let length = j - i + 1;
                if length > LONGEST {
                    out.push((length, shown.clone(), name));
                }
                i = j.max(i) + 1;
            } else {
                i += 1;
            }
        }
    }
    out
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.peek() {
        if word.starts_with("pub") || ["const", "async", "unsafe", "extern"].contains(word) {
            words.next();
        } else {
            break;
        }
    }
    if words.next()? != "fn" {
        return None;
    }
    let name: String = words.next()?.chars().take_while(|&c| ident(c)).collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let root = workspace();
    let mut circles = Vec::new();
    for krate in CRATES {
        for circle in Graph::of(&root.join(krate)).circles() {
            let mut files: Vec<String> = circle.iter().map(|m| m.join("/")).collect();
            files.sort();
            circles.push(format!("{krate}: {}", files.join(" <-> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_reading_finds_a_circle_between_two_files_and_none_through_a_facade() {
    let dir = std::env::temp_dir().join(format!("gates-structure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("facade")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nmod facade;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "use super::{a::A, facade::F};\npub struct B;\n",
    )
    .unwrap();
    std::fs::write(dir.join("facade/mod.rs"), "mod inner;\npub use inner::F;\n").unwrap();
    // A string and a comment that name `crate::a` are not imports.
    std::fs::write(
        dir.join("facade/inner.rs"),
        "// crate::a::A\npub struct F;\nconst S: &str = \"crate::b::B\";\n",
    )
    .unwrap();
    let circles = Graph::of(&dir).circles();
    let _ = std::fs::remove_dir_all(&dir);
    let found: Vec<Vec<String>> = circles
        .iter()
        .map(|c| {
            let mut files: Vec<String> = c.iter().map(|m| m.join("/")).collect();
            files.sort();
            files
        })
        .collect();
    assert_eq!(found, vec![vec!["a".to_string(), "b".to_string()]]);
}

#[test]
fn no_function_outside_tests_is_over_100_lines() {
    let root = workspace();
    let mut long: Vec<(usize, String, String)> = CRATES
        .iter()
        .flat_map(|krate| long_functions(&root.join(krate)))
        .collect();
    long.sort();
    let shown: Vec<String> = long
        .iter()
        .map(|(lines, file, name)| format!("{file}: fn {name}: {lines} lines"))
        .collect();
    assert!(
        shown.is_empty(),
        "functions over {LONGEST} lines:\n{}",
        shown.join("\n")
    );
}
