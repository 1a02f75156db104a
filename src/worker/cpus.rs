//! Which CPU each worker runs on: the inherited affinity mask (as `taskset` sets
//! it), narrowed by a list of CPUs and a number of workers.

use std::fmt::Write;

/// One past the highest CPU number Linux supports (`CONFIG_NR_CPUS` is at most 8192):
/// a list cannot name more, so a range like `0-99999999999` is refused, not expanded.
const MAX_CPUS: usize = 8192;

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    let mut cpus: Vec<usize> =
        core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|core| core.id).collect();
    cpus.sort_unstable();
    cpus
}

/// Parses a CPU list in taskset's syntax: numbers and ranges separated by commas,
/// a range optionally with a stride (`0-3,6`, `7`, `0-10:2`), each CPU below 8192.
///
/// ```
/// assert_eq!(percore::worker::parse_cpu_list("0-3,6"), Ok(vec![0, 1, 2, 3, 6]));
/// assert!(percore::worker::parse_cpu_list("3-1").is_err());
/// ```
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    let bad = |part: &str| format!("invalid CPU list {list:?}: {part:?} is not a CPU number or range");
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let (range, stride) = match part.split_once(':') {
            Some((range, stride)) => {
                (range, stride.parse::<usize>().ok().filter(|&s| s > 0).ok_or_else(|| bad(part))?)
            }
            None => (part, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((first, last)) => (first, last),
            None => (range, range),
        };
        let first: usize = first.trim().parse().map_err(|_| bad(part))?;
        let last: usize = last.trim().parse().map_err(|_| bad(part))?;
        if first > last {
            return Err(bad(part));
        }
        if last >= MAX_CPUS {
            return Err(format!(
                "invalid CPU list {list:?}: CPU {last} is above {}, the highest Linux has",
                MAX_CPUS - 1
            ));
        }
        cpus.extend((first..=last).step_by(stride));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The CPU of each worker: `workers` of them (default: one per CPU) on the first
/// CPUs of `requested` (default: every allowed CPU), wrapping round when there are
/// more workers than CPUs. A requested CPU outside `allowed` is an error naming it.
///
/// ```
/// use percore::worker::plan;
/// assert_eq!(plan(&[2, 3, 4, 5], None, Some(2)), Ok(vec![2, 3]));
/// assert_eq!(plan(&[2, 3], Some(&[3]), Some(3)), Ok(vec![3, 3, 3]));
/// assert!(plan(&[2, 3], Some(&[7]), None).unwrap_err().contains("CPU 7"));
/// ```
pub fn plan(
    allowed: &[usize],
    requested: Option<&[usize]>,
    workers: Option<usize>,
) -> Result<Vec<usize>, String> {
    let set = requested.unwrap_or(allowed);
    if let Some(cpu) = set.iter().find(|cpu| !allowed.contains(cpu)) {
        return Err(format!(
            "CPU {cpu} is not in this process's allowed CPUs ({})",
            format_cpu_list(allowed)
        ));
    }
    if set.is_empty() {
        return Err("no CPU to run on".into());
    }
    let workers = workers.unwrap_or(set.len());
    if workers == 0 {
        return Err("the number of workers must be at least 1".into());
    }
    Ok(set.iter().copied().cycle().take(workers).collect())
}

/// Formats CPUs as taskset does (`0-3,6`).
pub(crate) fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut rest = cpus;
    while let [first, ..] = rest {
        let run = rest.iter().enumerate().take_while(|&(i, &cpu)| cpu == first + i).count();
        let sep = if out.is_empty() { "" } else { "," };
        match run {
            1 => write!(out, "{sep}{first}"),
            _ => write!(out, "{sep}{first}-{}", first + run - 1),
        }
        .expect("writing to a String cannot fail");
        rest = &rest[run..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_cpus_are_this_processs_affinity() {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let list = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).expect("its line");
        assert_eq!(allowed_cpus(), parse_cpu_list(list.trim()).expect("the kernel's list"));
    }

    #[test]
    fn taskset_syntax() {
        assert_eq!(parse_cpu_list("0-3,6"), Ok(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("7"), Ok(vec![7]));
        assert_eq!(parse_cpu_list("0-6:2,1"), Ok(vec![0, 1, 2, 4, 6]));
        assert_eq!(parse_cpu_list("8191"), Ok(vec![8191]));
        for bad in ["", "a", "3-1", "1-", "0-4:0", "1,,2", "-1", "8192", "0-99999999999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn workers_take_the_first_cpus_and_wrap_round() {
        let allowed = [2, 3, 4, 5];
        assert_eq!(plan(&allowed, None, None), Ok(vec![2, 3, 4, 5]));
        assert_eq!(plan(&allowed, None, Some(2)), Ok(vec![2, 3]));
        assert_eq!(plan(&allowed, Some(&[4, 5]), Some(5)), Ok(vec![4, 5, 4, 5, 4]));
        let refused = plan(&allowed, Some(&[1, 2]), None).unwrap_err();
        assert!(refused.contains("CPU 1 ") && refused.contains("2-5"), "{refused}");
        assert_eq!(
            plan(&allowed, None, Some(0)),
            Err("the number of workers must be at least 1".to_string())
        );
    }

    #[test]
    fn lists_format_as_taskset_prints_them() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[]), "");
    }
}
