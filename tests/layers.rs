//! The layers DESIGN.md draws, checked against the code: every module of the library
//! (`src/`) and of the `percore` binary (`percore-bin/src/`) uses only the layers its
//! row of DESIGN.md's table says it may ("Layers"), each row's modules are in the
//! crate the row names, no two files of one directory use each other, directly or
//! round a longer circle, and no file reaches into the module that declares it (its
//! `mod.rs`, `lib.rs` or `main.rs`) for an item of that file's own: a file uses its
//! siblings, and its parent only declares and re-exports them.
//!
//! What counts as a use: a path `crate::NAME` or `percore::NAME` (the binary's files
//! reach the library by its name) outside comments, in the code each file builds
//! (its `#[cfg(test)]` module left out); between files of one directory, `super::NAME`
//! and `crate::...::NAME` where `NAME` is a sibling file. The table is read from
//! DESIGN.md itself, so that the table and the code cannot drift apart unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The two crates of the workspace, by the directory of their sources (from the
/// repository's root, where the library's tests run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crate {
    Library,
    Binary,
}

impl Crate {
    const ALL: [Crate; 2] = [Crate::Library, Crate::Binary];

    fn sources(self) -> &'static Path {
        Path::new(match self {
            Crate::Library => "src",
            Crate::Binary => "percore-bin/src",
        })
    }
}

/// A row of DESIGN.md's table: the crate its layers are modules of, and the layers
/// they may use.
#[derive(Debug)]
struct Row {
    krate: Crate,
    may_use: BTreeSet<String>,
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code of a file as it builds: comments dropped, the test module cut off.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let test_module = text.match_indices("#[cfg(test)]").map(|(at, _)| at).find(|&at| {
        let line = text[at + "#[cfg(test)]".len()..].trim_start().lines().next().unwrap_or_default();
        line.starts_with("mod ") || (line.starts_with("pub") && line.contains(" mod "))
    });
    let built = &text[..test_module.unwrap_or(text.len())];
    built.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The identifiers that follow each `prefix` in `code`.
fn names_after<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    code.match_indices(prefix).filter_map(move |(at, _)| {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &code[at + prefix.len()..];
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    })
}

/// The layer a file belongs to: the first component of its path under its crate's
/// sources, or its name.
fn layer_of(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under the sources").as_os_str().to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The layers each file of `layer`, in `krate`, uses, by the paths in `code`;
/// `layers` are those of the table, each with its crate.
fn layers_used(layer: &str, krate: Crate, code: &str, layers: &BTreeMap<String, Row>) -> BTreeSet<String> {
    let of = |name: &str, wanted: Crate| layers.get(name).is_some_and(|row| row.krate == wanted);
    let mut used = BTreeSet::new();
    match krate {
        Crate::Binary => {
            used.extend(names_after(code, "percore::").map(str::to_string));
            // The binary's own modules, or an item of main.rs (crate::size).
            for name in names_after(code, "crate::") {
                used.insert(if of(name, Crate::Binary) { name.to_string() } else { "main".to_string() });
            }
        }
        Crate::Library => {
            let library = names_after(code, "crate::").filter(|name| of(name, Crate::Library));
            used.extend(library.map(str::to_string));
        }
    }
    used.remove(layer);
    used
}

/// DESIGN.md's layer table: each layer, its crate (a row that starts with
/// `percore-bin:` is the binary's, the others the library's), and the layers it may
/// use ("everything above" is every layer of the rows before it).
fn design_table() -> BTreeMap<String, Row> {
    let design = std::fs::read_to_string("DESIGN.md").expect("reading DESIGN.md");
    let section = design.split("## Layers").nth(1).expect("DESIGN.md has a Layers section");
    let rows =
        section.lines().skip_while(|line| !line.starts_with('|')).take_while(|line| line.starts_with('|'));
    let mut table = BTreeMap::new();
    let mut above: BTreeSet<String> = BTreeSet::new();
    for row in rows.skip(2) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (names, may_use) = (cells[1], cells[3]);
        let (krate, names) = match names.strip_prefix("percore-bin:") {
            Some(names) => (Crate::Binary, names),
            None => (Crate::Library, names),
        };
        let layers: Vec<String> = names.split('`').skip(1).step_by(2).map(str::to_string).collect();
        assert!(!layers.is_empty(), "a row of DESIGN.md's layer table names no layer: {row}");
        let allowed: BTreeSet<String> = if may_use.contains("everything above") {
            above.clone()
        } else {
            may_use
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|word| !word.is_empty())
                .map(str::to_string)
                .collect()
        };
        for layer in &layers {
            table.insert(layer.clone(), Row { krate, may_use: allowed.clone() });
        }
        above.extend(layers);
    }
    table
}

#[test]
fn every_layer_uses_only_what_design_md_says_it_may() {
    let table = design_table();
    let mut wrong = Vec::new();
    for krate in Crate::ALL {
        for path in rust_files(krate.sources()) {
            let relative = path.strip_prefix(krate.sources()).expect("under its crate's sources");
            let layer = layer_of(relative);
            if krate == Crate::Library && layer == "lib" {
                continue;
            }
            let row = table
                .get(&layer)
                .unwrap_or_else(|| panic!("{} is in no row of DESIGN.md's table", path.display()));
            if row.krate != krate {
                let (file, there, listed) =
                    (path.display(), krate.sources().display(), row.krate.sources().display());
                wrong.push(format!("{file} ({layer}) is in {there}, where its row says {listed}"));
            }
            for used in layers_used(&layer, krate, &code_of(&path), &table) {
                if !row.may_use.contains(&used) {
                    wrong.push(format!("{} ({layer}) uses {used}", path.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "uses DESIGN.md's layer table does not allow:\n{}", wrong.join("\n"));
}

/// The sibling files (and directories with a `mod.rs`) of each directory of `files`.
fn siblings(files: &[PathBuf]) -> BTreeMap<PathBuf, BTreeSet<String>> {
    let mut by_dir: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for path in files {
        let dir = path.parent().expect("a directory").to_path_buf();
        let stem = path.file_stem().expect("a name").to_string_lossy().to_string();
        if stem == "mod" {
            let parent = dir.parent().expect("a parent").to_path_buf();
            let name = dir.file_name().expect("a name").to_string_lossy().to_string();
            by_dir.entry(parent).or_default().insert(name);
        } else if !matches!(stem.as_str(), "lib" | "main") {
            by_dir.entry(dir).or_default().insert(stem);
        }
    }
    by_dir
}

/// The siblings a file's code names: `super::NAME`, names inside `super::{...}`,
/// and `crate::PATH::NAME` where `crate::PATH::` is their directory (`through`).
fn siblings_used(code: &str, sibling_names: &BTreeSet<String>, own: &str, through: &str) -> BTreeSet<String> {
    let mut used: BTreeSet<String> = names_after(code, "super::").map(str::to_string).collect();
    used.extend(names_after(code, through).map(str::to_string));
    for (at, _) in code.match_indices("super::{") {
        let group = &code[at + "super::{".len()..];
        let mut depth = 1;
        let end = group
            .char_indices()
            .find_map(|(i, c)| {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(i)
            })
            .unwrap_or(group.len());
        let words = group[..end].split(|c: char| !(c.is_alphanumeric() || c == '_'));
        used.extend(words.map(str::to_string));
    }
    used.retain(|name| sibling_names.contains(name) && name != own);
    used
}

/// `crate::PATH::` for a directory of `krate`: how its files are named from anywhere
/// in their crate.
fn path_through(krate: Crate, dir: &Path) -> String {
    let relative = dir.strip_prefix(krate.sources()).expect("under its crate's sources");
    let parts: Vec<String> =
        relative.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect();
    format!("crate::{}", parts.iter().map(|part| format!("{part}::")).collect::<String>())
}

/// The circles in `graph`, each as the names round it.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for start in graph.keys() {
        // Depth-first from `start`, only through names after it: each circle once.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == start {
                    found.push(path.clone());
                } else if next > start && !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found
}

#[test]
fn no_two_files_of_a_directory_use_each_other() {
    let mut found = Vec::new();
    for krate in Crate::ALL {
        found.extend(circles_in(krate));
    }
    assert!(found.is_empty(), "files that use each other, round a circle:\n{}", found.join("\n"));
}

/// The circles between the files of each directory of `krate`, each as its directory
/// and the names round it.
fn circles_in(krate: Crate) -> Vec<String> {
    let files = rust_files(krate.sources());
    let by_dir = siblings(&files);
    let mut found = Vec::new();
    for (dir, names) in &by_dir {
        let through = path_through(krate, dir);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for path in files.iter().filter(|path| path.parent() == Some(dir.as_path())) {
            let own = path.file_stem().expect("a name").to_string_lossy().to_string();
            if matches!(own.as_str(), "mod" | "lib" | "main") {
                continue;
            }
            graph.insert(own.clone(), siblings_used(&code_of(path), names, &own, &through));
        }
        // A sibling that is a directory: its mod.rs names the others with `super::`,
        // the files inside it with `super::super::`.
        for name in names.iter().filter(|name| dir.join(name.as_str()).join("mod.rs").exists()) {
            let inner = dir.join(name.as_str());
            let mut code = code_of(&inner.join("mod.rs"));
            for file in rust_files(&inner).iter().filter(|file| file.parent() == Some(inner.as_path())) {
                for used in names_after(&code_of(file), "super::super::") {
                    code += &format!("\nsuper::{used}");
                }
            }
            graph.insert(name.clone(), siblings_used(&code, names, name, &through));
        }
        for circle in circles(&graph) {
            found.push(format!("{}: {}", dir.display(), circle.join(" → ")));
        }
    }
    found
}

/// The first segment of each path a file's code names after `prefix`: after
/// `super::`, the name itself, and inside `super::{...}`, the first segment of each
/// path of the group.
fn first_segments_after(code: &str, prefix: &str) -> BTreeSet<String> {
    // A path's start: `super::super::x` names the grandparent's `x`, not a parent's.
    let starts = |at: usize| !code[..at].ends_with("::");
    let mut names: BTreeSet<String> = code
        .match_indices(prefix)
        .filter(|&(at, _)| starts(at))
        .flat_map(|(at, _)| names_after(&code[at..], prefix).next())
        .map(str::to_string)
        .collect();
    let group_start = format!("{prefix}{{");
    for (at, _) in code.match_indices(&group_start).filter(|&(at, _)| starts(at)) {
        let group = &code[at + group_start.len()..];
        let (mut depth, mut item_start) = (1, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    let item = group[item_start..i].trim();
                    let end = item.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(item.len());
                    if end > 0 {
                        names.insert(item[..end].to_string());
                    }
                    item_start = i + 1;
                    if c == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    }
    names
}

#[test]
fn no_file_reaches_into_the_module_that_declares_it() {
    let mut found = Vec::new();
    for krate in Crate::ALL {
        let files = rust_files(krate.sources());
        let by_dir = siblings(&files);
        for path in &files {
            let own = path.file_stem().expect("a name").to_string_lossy().to_string();
            if matches!(own.as_str(), "mod" | "lib" | "main") {
                continue;
            }
            let dir = path.parent().expect("a directory");
            let names = by_dir.get(dir).cloned().unwrap_or_default();
            let code = code_of(path);
            let mut used = first_segments_after(&code, "super::");
            if dir != krate.sources() {
                // `crate::reactor::Item` from inside reactor/ is the parent's item too.
                used.extend(first_segments_after(&code, &path_through(krate, dir)));
            }
            for name in used {
                if !names.contains(&name) && name != "super" {
                    found.push(format!("{} uses {name} of the module that declares it", path.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "files that reach into their parent module:\n{}", found.join("\n"));
}
