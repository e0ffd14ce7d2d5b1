//! The WIT `batch` string tables: every string of a batch in one `text`, so crossing into the
//! component is a handful of copies instead of an allocation per string.

use super::{Message, Persona, wit1, wit2};

/// A `0.1` batch: the personas' strings, then each message's id, channel, author, text and
/// mentions. Fails with the size reached when the strings do not fit its 32-bit numbers.
pub(super) fn v0_1(personas: &[Persona], messages: &[Message]) -> Result<wit1::Batch, usize> {
    let mut table = Table::with_capacity(personas, messages);
    let personas = personas
        .iter()
        .map(|p| {
            Ok(wit1::BatchPersona {
                name: table.push(&p.name)?,
                mentions: p.mentions,
                keywords: run(table.run(&p.keywords)?),
                all_messages: p.all_messages,
                subscribe: run(table.run(&p.subscribe)?),
            })
        })
        .collect::<Result<Vec<_>, usize>>()?;
    let messages = messages
        .iter()
        .map(|m| {
            let strings = table.push(&m.id)?;
            for s in [&m.channel, &m.author, &m.text] {
                table.push(s)?;
            }
            Ok(wit1::BatchMessage {
                strings,
                mentions: table.run(&m.mentions)?.1,
            })
        })
        .collect::<Result<Vec<_>, usize>>()?;
    Ok(wit1::Batch {
        text: table.text,
        ends: table.ends,
        personas,
        messages,
    })
}

/// A `0.2` batch: each message's id, channel, author, author name (none known: empty), text and
/// mentions; the personas are the set's.
pub(super) fn v0_2(messages: &[Message]) -> Result<wit2::Batch, usize> {
    let mut table = Table::with_capacity(&[], messages);
    let messages = messages
        .iter()
        .map(|m| {
            let strings = table.push(&m.id)?;
            for s in [&m.channel, &m.author, "", &m.text] {
                table.push(s)?;
            }
            Ok(wit2::BatchMessage {
                strings,
                mentions: table.run(&m.mentions)?.1,
            })
        })
        .collect::<Result<Vec<_>, usize>>()?;
    Ok(wit2::Batch {
        text: table.text,
        ends: table.ends,
        messages,
    })
}

fn run((start, len): (u32, u32)) -> wit1::Run {
    wit1::Run { start, len }
}

/// The string table of a batch being packed.
struct Table {
    text: String,
    ends: Vec<u32>,
}

impl Table {
    /// Sized for every string of the batch, so packing copies each string once.
    fn with_capacity(personas: &[Persona], messages: &[Message]) -> Table {
        let strings = |list: &[String]| list.iter().map(String::len).sum::<usize>();
        let (mut bytes, mut count) = (0, 0);
        for p in personas {
            bytes += p.name.len() + strings(&p.keywords) + strings(&p.subscribe);
            count += 1 + p.keywords.len() + p.subscribe.len();
        }
        for m in messages {
            bytes += m.id.len() + m.channel.len() + m.author.len() + m.text.len();
            bytes += strings(&m.mentions);
            count += 5 + m.mentions.len();
        }
        Table {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(count),
        }
    }

    /// Appends `s`, returning its number. Fails with the text's size if `s` would end past 4 GiB,
    /// or with the number of strings past 32 bits.
    fn push(&mut self, s: &str) -> Result<u32, usize> {
        let number = u32::try_from(self.ends.len()).map_err(|_| self.ends.len())?;
        let end = self.text.len().saturating_add(s.len());
        let end = u32::try_from(end).map_err(|_| end)?;
        self.text.push_str(s);
        self.ends.push(end);
        Ok(number)
    }

    /// Appends `items`, returning the number of the first and how many.
    fn run(&mut self, items: &[String]) -> Result<(u32, u32), usize> {
        let start = u32::try_from(self.ends.len()).map_err(|_| self.ends.len())?;
        for item in items {
            self.push(item)?;
        }
        let len = u32::try_from(items.len()).map_err(|_| items.len())?;
        Ok((start, len))
    }
}
