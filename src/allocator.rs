//! The memory allocator of the Linux release build, which links musl (Makefile, docs/performance.md):
//! musl's own allocator for a firing, mimalloc for the commands that read many files.
//!
//! Why two. A firing allocates a few hundred small blocks on one thread: musl's allocator serves
//! them with nothing to set up, and its peak memory stays within the 3 MiB budget. The readers —
//! `validate`, `list`, `health`, the dashboard — parse thousands of definitions and log lines on
//! every core, where musl's allocator, one lock for the whole process, made `health` over 1,000
//! automations take 316 ms (glibc's: 36 ms); mimalloc takes 45–48 ms. Used for a firing too, it
//! cost 80 more page faults, and the firing read 0.74 × flock where musl's own allocator read 0.68
//! (earlier runs, not paired with each other: docs/performance.md).
//!
//! The mode starts light and is switched once, to heavy, as soon as the command is known not to
//! be a `run` ([`for_heavy_work`]). Blocks made before the switch stay musl's: every free and
//! every reallocation goes to the allocator that made the block, asked of mimalloc, which knows
//! the memory it reserved (`mi_is_in_heap_region`, a lookup in its page map; false for any
//! address before mimalloc first allocates). So the switch is safe at any moment, on any thread.
//!
//! Built on every Linux target so its tests run on the suite's glibc build too; it is the global
//! allocator only where musl is the C library. Elsewhere the C library's allocator serves all.

#[cfg(target_os = "linux")]
pub use split::Split;

/// Says the rest of this process is heavy work (a reader, the dashboard, any command but a
/// firing's `run`): later allocations go to mimalloc. A no-op where [`Split`] is not the global
/// allocator.
pub fn for_heavy_work() {
    #[cfg(all(target_os = "linux", target_env = "musl"))]
    GLOBAL.heavy();
}

#[cfg(all(target_os = "linux", target_env = "musl"))]
#[global_allocator]
static GLOBAL: Split = Split::new();

#[cfg(target_os = "linux")]
mod split {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicBool, Ordering};

    use libmimalloc_sys as mi;

    /// The C library's allocator until [`Split::heavy`], mimalloc after; each block freed by the
    /// one that made it.
    pub struct Split {
        heavy: AtomicBool,
    }

    impl Default for Split {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Split {
        /// Light: the C library's allocator serves until [`Split::heavy`].
        pub const fn new() -> Self {
            Self {
                heavy: AtomicBool::new(false),
            }
        }

        /// From now on, new blocks come from mimalloc.
        pub fn heavy(&self) {
            self.heavy.store(true, Ordering::Relaxed);
        }

        fn is_heavy(&self) -> bool {
            self.heavy.load(Ordering::Relaxed)
        }
    }

    /// Whether mimalloc made the block at `ptr`.
    fn mimallocs(ptr: *mut u8) -> bool {
        // SAFETY: a lookup of an address in mimalloc's page map; it dereferences nothing at `ptr`.
        unsafe { mi::mi_is_in_heap_region(ptr.cast()) }
    }

    // SAFETY: each method hands the layout on unchanged to an allocator that honours size and
    // alignment (System; mimalloc's `_aligned` calls), and every block is freed or resized by the
    // allocator that made it (`mimallocs`), whichever mode is current.
    unsafe impl GlobalAlloc for Split {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if self.is_heavy() {
                unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()).cast() }
            } else {
                unsafe { System.alloc(layout) }
            }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            if self.is_heavy() {
                unsafe { mi::mi_zalloc_aligned(layout.size(), layout.align()).cast() }
            } else {
                unsafe { System.alloc_zeroed(layout) }
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            if mimallocs(ptr) {
                unsafe { mi::mi_free(ptr.cast()) }
            } else {
                unsafe { System.dealloc(ptr, layout) }
            }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if mimallocs(ptr) {
                unsafe { mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast() }
            } else {
                unsafe { System.realloc(ptr, layout, new_size) }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::{Split, mimallocs};
        use std::alloc::{GlobalAlloc, Layout};

        /// A block of `len` bytes at `align` from `a`, filled with `byte`.
        fn block(a: &Split, len: usize, align: usize, byte: u8) -> (*mut u8, Layout) {
            let layout = Layout::from_size_align(len, align).unwrap();
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "alignment {align} honoured");
            unsafe { p.write_bytes(byte, len) };
            (p, layout)
        }

        fn holds(p: *const u8, len: usize, byte: u8) -> bool {
            unsafe { std::slice::from_raw_parts(p, len) }
                .iter()
                .all(|b| *b == byte)
        }

        #[test]
        fn blocks_made_before_the_switch_stay_the_c_librarys_and_survive_it() {
            let a = Split::new();
            let (light, l1) = block(&a, 100, 8, 0xA1);
            let (light_big, l2) = block(&a, 70_000, 4096, 0xA2);
            assert!(!mimallocs(light) && !mimallocs(light_big));
            a.heavy();
            let (heavy, l3) = block(&a, 100, 8, 0xB1);
            let (heavy_big, l4) = block(&a, 70_000, 4096, 0xB2);
            assert!(mimallocs(heavy) && mimallocs(heavy_big));
            // A block resized after the switch stays with the allocator that made it, contents
            // kept.
            let light = unsafe { a.realloc(light, l1, 5_000) };
            assert!(!mimallocs(light) && holds(light, 100, 0xA1));
            let heavy = unsafe { a.realloc(heavy, l3, 5_000) };
            assert!(mimallocs(heavy) && holds(heavy, 100, 0xB1));
            assert!(holds(light_big, 70_000, 0xA2) && holds(heavy_big, 70_000, 0xB2));
            unsafe {
                a.dealloc(light, Layout::from_size_align(5_000, 8).unwrap());
                a.dealloc(light_big, l2);
                a.dealloc(heavy, Layout::from_size_align(5_000, 8).unwrap());
                a.dealloc(heavy_big, l4);
            }
        }

        #[test]
        fn zeroed_blocks_are_zero_in_either_mode() {
            let a = Split::new();
            let layout = Layout::from_size_align(200, 16).unwrap();
            for _ in 0..2 {
                // Blocks dirtied, every other one freed while its neighbours keep their pages in
                // use: the zeroed blocks asked for next reuse that memory (fresh pages would be
                // zero whoever asked).
                let dirty: Vec<_> = (0..1000).map(|_| block(&a, 200, 16, 0xEE).0).collect();
                for p in dirty.iter().step_by(2) {
                    unsafe { a.dealloc(*p, layout) };
                }
                let zeroed: Vec<_> = (0..500)
                    .map(|_| unsafe { a.alloc_zeroed(layout) })
                    .collect();
                assert!(zeroed.iter().all(|p| !p.is_null() && holds(*p, 200, 0)));
                for p in zeroed.iter().chain(dirty.iter().skip(1).step_by(2)) {
                    unsafe { a.dealloc(*p, layout) };
                }
                a.heavy();
            }
        }

        #[test]
        fn blocks_freed_on_another_thread_go_back_to_their_maker() {
            let a: &'static Split = Box::leak(Box::new(Split::new()));
            let light = block(a, 256, 16, 1).0 as usize;
            a.heavy();
            let heavy = block(a, 256, 16, 2).0 as usize;
            std::thread::spawn(move || {
                let layout = Layout::from_size_align(256, 16).unwrap();
                assert!(!mimallocs(light as *mut u8) && mimallocs(heavy as *mut u8));
                unsafe {
                    a.dealloc(light as *mut u8, layout);
                    a.dealloc(heavy as *mut u8, layout);
                }
            })
            .join()
            .unwrap();
        }
    }
}
