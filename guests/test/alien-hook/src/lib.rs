//! `alien-hook`: a hook that also imports an interface apiary does not offer (`test:alien/vault`),
//! for the host's tests: it must be refused at load, naming the import.

wit_bindgen::generate!({
    path: "../../../wit/apiary-plugin@0.1.0",
    inline: "
        package test:alien;
        interface vault { open: func(name: string) -> string; }
        world alien-hook {
            include apiary:plugin/hook@0.1.0;
            import vault;
        }
    ",
    world: "test:alien/alien-hook",
    generate_all,
});

use exports::apiary::plugin::lifecycle::{Guest, MessageContext, Persona};

struct Alien;

impl Guest for Alien {
    fn on_start(_: Persona) -> Result<(), String> {
        Ok(())
    }

    fn on_stop(_: Persona) -> Result<(), String> {
        Ok(())
    }

    fn on_message(context: MessageContext) -> Result<(), String> {
        let _ = test::alien::vault::open(&context.message.text);
        Ok(())
    }
}

export!(Alien);
