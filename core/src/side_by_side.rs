//! Pure work spread over the cores the process may use. The checks, and each host's loss in
//! the host-loss model, read one snapshot and nothing of each other's results, so they can
//! run side by side; their results keep the order they were asked in.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, on up to as many threads as the process has cores, each thread taking
/// the next item when it is done with one (items can differ a hundredfold in cost); the
/// results are in the items' order. A panic in `f` is the caller's panic.
pub fn map<T: Sync, U: Send>(items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, U)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, u)| u).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_in_the_order_of_the_items_however_long_each_takes() {
        let items: Vec<u64> = (0..200).collect();
        let results = map(&items, |&n| {
            // Early items take longest, so later ones finish first.
            let mut spun = 0u64;
            for k in 0..(200 - n) * 2_000 {
                spun = std::hint::black_box(spun.wrapping_add(k));
            }
            std::hint::black_box(spun);
            n
        });
        assert_eq!(results, items);
    }

    #[test]
    fn no_items_give_no_results_and_one_item_runs_here() {
        assert!(map(&[] as &[u8], |_| 1).is_empty());
        let here = std::thread::current().id();
        assert_eq!(map(&[7], |_| std::thread::current().id()), vec![here]);
    }
}
