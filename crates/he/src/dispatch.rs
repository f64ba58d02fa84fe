//! Runtime CPU-feature dispatch for the crate's hot element-wise loops.
//!
//! The crate is built for baseline x86-64, where those loops get 2-lane SSE2 at best, a software
//! popcount (two per centered-binomial sample) and no MULX. [`fast_dispatch!`] compiles one body
//! twice — for AVX2, BMI1/2, POPCNT and LZCNT, and as plain code — and picks at run time; the
//! body is the same safe integer code either way, so both versions compute identical results.

/// Defines `fn $name(args) [-> R]` whose body runs compiled for AVX2, BMI1/2, POPCNT and LZCNT
/// when the CPU has them ([`has_fast_features`]), and as plain code otherwise.
macro_rules! fast_dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
                #[allow(unsafe_code)]
                unsafe fn fast($($arg: $ty),*) $(-> $ret)? {
                    body($($arg),*)
                }
                if $crate::dispatch::has_fast_features() {
                    // SAFETY: the running CPU supports AVX2, BMI1, BMI2, POPCNT and LZCNT
                    // (checked on the line above), which is the only requirement for calling
                    // a function with exactly those `target_feature`s; the body is safe code.
                    #[allow(unsafe_code)]
                    return unsafe { fast($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

/// Whether the CPU has every feature [`fast_dispatch!`] compiles for (cached by std).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_fast_features() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
        && std::is_x86_feature_detected!("popcnt")
        && std::is_x86_feature_detected!("lzcnt")
}
