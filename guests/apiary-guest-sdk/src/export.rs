//! The export macros. Each one generates the world's bindings in the calling crate (see build.rs
//! for why there), implements the generated `Guest` trait by moving the WIT values into this
//! crate's types and back, and exports the component. Moves only: strings are not copied.
//!
//! On targets other than wasm32 a macro only checks that the type implements its trait, so the
//! same crate builds natively for unit tests.

/// Exports a [`Hook`](crate::Hook) as the component's `hook` world.
///
/// ```ignore
/// struct MyHook;
/// impl apiary_guest_sdk::Hook for MyHook { /* the methods you need */ }
/// apiary_guest_sdk::export_hook!(MyHook);
/// ```
#[macro_export]
macro_rules! export_hook {
    ($component:ident) => {
        const _: fn() = $crate::hook::__assert_hook::<$component>;

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __apiary_export_hook {
            use super::*;

            $crate::__generate_world!(hook);

            use exports::apiary::plugin::lifecycle as wit;
            use $crate::hook as sdk;

            fn persona(p: wit::Persona) -> sdk::Persona {
                sdk::Persona {
                    pack_id: p.pack_id,
                    name: p.name,
                }
            }

            // A hook's error string is its decision (`refused`); a panic is a trap.
            impl wit::Guest for $component {
                fn on_start(p: wit::Persona) -> Result<(), wit::HookError> {
                    <$component as sdk::Hook>::on_start(persona(p)).map_err(wit::HookError::Refused)
                }

                fn on_stop(p: wit::Persona) -> Result<(), wit::HookError> {
                    <$component as sdk::Hook>::on_stop(persona(p)).map_err(wit::HookError::Refused)
                }

                fn on_message(context: wit::MessageContext) -> Result<(), wit::HookError> {
                    let m = context.message;
                    <$component as sdk::Hook>::on_message(sdk::MessageContext {
                        persona: persona(context.persona),
                        message: sdk::Message {
                            id: m.id,
                            channel: m.channel,
                            thread: m.thread,
                            author: m.author,
                            author_name: m.author_name,
                            text: m.text,
                        },
                    })
                    .map_err(wit::HookError::Refused)
                }
            }

            export!($component);
        }
    };
}

/// Exports a [`Trigger`](crate::Trigger) as the component's `trigger` world: each `persona-set`
/// the host makes is one value of the type.
///
/// ```ignore
/// apiary_guest_sdk::export_trigger!(MyTrigger);
/// apiary_guest_sdk::export_trigger!(apiary_guest_sdk::trigger::Each<MyRule>);
/// ```
#[macro_export]
macro_rules! export_trigger {
    ($component:ty) => {
        const _: fn() = $crate::trigger::__assert_trigger::<$component>;

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __apiary_export_trigger {
            use super::*;

            $crate::__generate_world!(trigger);

            use exports::apiary::plugin::matcher as wit;
            use $crate::trigger as sdk;

            struct Export;

            /// The guest's `persona-set`: `decide` takes `&self`, the trait `&mut self`.
            pub struct Set(::core::cell::RefCell<$component>);

            impl wit::Guest for Export {
                type PersonaSet = Set;
            }

            impl wit::GuestPersonaSet for Set {
                fn new(personas: Vec<wit::Persona>) -> Set {
                    let personas = personas
                        .into_iter()
                        .map(|p| sdk::Persona {
                            name: p.name,
                            mentions: p.mentions,
                            keywords: p.keywords,
                            all_messages: p.all_messages,
                            subscribe: p.subscribe,
                        })
                        .collect();
                    Set(::core::cell::RefCell::new(
                        <$component as sdk::Trigger>::new(personas),
                    ))
                }

                fn decide(&self, b: wit::Batch) -> Vec<wit::Wake> {
                    let batch = sdk::Batch {
                        text: b.text,
                        ends: b.ends,
                        messages: b
                            .messages
                            .into_iter()
                            .map(|m| sdk::BatchMessage {
                                strings: m.strings,
                                mentions: m.mentions,
                            })
                            .collect(),
                    };
                    sdk::Trigger::decide(&mut *self.0.borrow_mut(), &batch)
                        .into_iter()
                        .map(|w| wit::Wake {
                            message: w.message,
                            persona: w.persona,
                            reason: match w.reason {
                                sdk::WakeReason::Mentioned => wit::WakeReason::Mentioned,
                                sdk::WakeReason::Keyword(i) => wit::WakeReason::Keyword(i),
                                sdk::WakeReason::AllMessages => wit::WakeReason::AllMessages,
                            },
                        })
                        .collect()
                }
            }

            export!(Export);
        }
    };
}

/// Exports a [`Converter`](crate::Converter) as the component's `converter` world.
#[macro_export]
macro_rules! export_converter {
    ($component:ident) => {
        const _: fn() = $crate::converter::__assert_converter::<$component>;

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __apiary_export_converter {
            use super::*;

            $crate::__generate_world!(converter);

            use exports::apiary::plugin::format_converter as wit;
            use $crate::converter as sdk;

            fn findings(list: Vec<sdk::Finding>) -> Vec<wit::Finding> {
                list.into_iter()
                    .map(|f| wit::Finding {
                        code: f.code,
                        path: f.path,
                        field: f.field,
                        message: f.message,
                    })
                    .collect()
            }

            impl wit::Guest for $component {
                fn info() -> wit::ConverterInfo {
                    let info = <$component as sdk::Converter>::info();
                    wit::ConverterInfo {
                        name: info.name,
                        version: info.version,
                        conversions: info
                            .conversions
                            .into_iter()
                            .map(|c| wit::Conversion {
                                source: c.source,
                                target: c.target,
                            })
                            .collect(),
                    }
                }

                fn detect() -> Vec<wit::Detection> {
                    <$component as sdk::Converter>::detect()
                        .into_iter()
                        .map(|d| wit::Detection {
                            format: d.format,
                            confidence: d.confidence,
                            evidence: d.evidence,
                        })
                        .collect()
                }

                // A converter's error string is a failure (`failed`).
                fn convert(r: wit::Request) -> Result<wit::Report, wit::ConvertError> {
                    let report = <$component as sdk::Converter>::convert(sdk::Request {
                        source: r.source,
                        target: r.target,
                        options: r.options,
                    })
                    .map_err(wit::ConvertError::Failed)?;
                    Ok(wit::Report {
                        lost: findings(report.lost),
                        synthesised: findings(report.synthesised),
                        normalised: findings(report.normalised),
                        reinterpreted: findings(report.reinterpreted),
                    })
                }
            }

            export!($component);
        }
    };
}
