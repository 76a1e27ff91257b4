//! Reading raw `LifecycleConfiguration` bytes into a small element tree, with
//! Go `encoding/xml`'s reading rules (local names only, direct character data
//! concatenated, nothing after the root element read), and [`ParseError`].

use std::fmt;

use quick_xml::events::Event;
use quick_xml::reader::Reader;

/// Largest document accepted: SeaweedFS refuses PUT bodies over 1 MiB
/// (`EntityTooLarge`), so anything bigger did not come from a real PUT.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// The root element's local name (any namespace, as Go matches it).
pub const ROOT_ELEMENT: &str = "LifecycleConfiguration";

/// Elements deeper than this are never read by the schema
/// (`LifecycleConfiguration/Rule/Filter/And/Tag/Key` is depth 6), so they are
/// checked for well-formedness but not stored. Keeping the stored tree shallow
/// also keeps dropping it non-recursive in practice: a 1 MiB document of nested
/// `<a>` would otherwise build a tree deep enough to overflow the stack.
const MAX_STORED_DEPTH: usize = 6;

/// Longest ID shown in messages before it is cut.
const MAX_SHOWN_ID_CHARS: usize = 64;

/// Names one rule of a document for messages: by `<ID>` when it has a
/// non-empty one, else by its 1-based position.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleLocator {
    /// The rule's `<ID>` text, when present and non-empty.
    pub id: Option<String>,
    /// 1-based position of the `<Rule>` element in the document.
    pub position: usize,
}

impl fmt::Display for RuleLocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id {
            // Very long IDs are cut so messages stay readable; the position
            // still identifies the rule.
            Some(id) if id.chars().count() > MAX_SHOWN_ID_CHARS => {
                let cut: String = id.chars().take(MAX_SHOWN_ID_CHARS).collect();
                write!(f, "rule {:?} (#{})", format!("{cut}…"), self.position)
            }
            Some(id) => write!(f, "rule {id:?} (#{})", self.position),
            None => write!(f, "rule #{}", self.position),
        }
    }
}

/// A document that cannot be read at all. Anything that can be read but breaks
/// AWS's rules is a [`super::ValidationError`] instead, because SeaweedFS
/// accepted such documents and enforces them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Over [`MAX_DOCUMENT_BYTES`].
    #[error(
        "lifecycle configuration is {size} bytes; at most {max} bytes (1 MiB) are allowed",
        max = MAX_DOCUMENT_BYTES
    )]
    TooLarge {
        /// Size of the rejected document in bytes.
        size: usize,
    },
    /// Not UTF-8 (Go's decoder rejects other encodings too).
    #[error(
        "lifecycle configuration is not valid UTF-8 (first bad byte at offset {offset}); send it UTF-8 encoded"
    )]
    NotUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// Not well-formed XML.
    #[error("lifecycle configuration is not well-formed XML at byte {offset}: {reason}")]
    Malformed {
        /// Byte offset where the reader gave up.
        offset: u64,
        /// What the XML reader found wrong.
        reason: String,
    },
    /// No element at all.
    #[error("lifecycle configuration has no root element; expected <{ROOT_ELEMENT}>")]
    NoRoot,
    /// The root element is not `LifecycleConfiguration`.
    #[error("root element is <{found}>; expected <{ROOT_ELEMENT}>")]
    WrongRoot {
        /// Local name of the root element found.
        found: String,
    },
    /// A number, boolean or date element whose text does not parse.
    #[error("{rule}: {element}: {value:?} is not valid; expected {expected}")]
    BadValue {
        /// The rule holding the element.
        rule: RuleLocator,
        /// Element path inside the rule, e.g. `Expiration/Days`.
        element: String,
        /// The element's text as found.
        value: String,
        /// What the element accepts.
        expected: &'static str,
    },
}

/// One stored element: its local name, its direct character data and its
/// children. Go reads a scalar element's value as the concatenation of the
/// character data directly inside it (nested elements are skipped), which is
/// exactly `text` here.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub name: String,
    pub text: String,
    pub children: Vec<Node>,
}

impl Node {
    /// Children with this local name, in document order.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
}

/// The root element plus what surrounded it.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub root: Node,
    /// Non-whitespace text before the root, or any content after it. Go stops
    /// reading at the root's end tag and skips text before it, so SeaweedFS
    /// accepts such documents; AWS does not.
    pub content_outside_root: bool,
}

fn malformed(offset: u64, reason: impl fmt::Display) -> ParseError {
    ParseError::Malformed {
        offset,
        reason: reason.to_string(),
    }
}

/// XML 1.0 `Char` production; Go's decoder rejects anything else.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fn resolve_entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "apos" => Some('\''),
        "quot" => Some('"'),
        _ => None,
    }
}

/// Reads `input` into a [`Document`]. Only well-formedness is checked here.
pub(crate) fn read_document(input: &[u8]) -> Result<Document, ParseError> {
    if input.len() > MAX_DOCUMENT_BYTES {
        return Err(ParseError::TooLarge { size: input.len() });
    }
    let text = std::str::from_utf8(input).map_err(|e| ParseError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    if let Some((offset, c)) = text.char_indices().find(|&(_, c)| !is_xml_char(c)) {
        return Err(malformed(
            offset as u64,
            format!("character U+{:04X} is not allowed in XML", c as u32),
        ));
    }
    // A UTF-8 byte-order mark is not content.
    let body = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let bom_len = (text.len() - body.len()) as u64;

    let mut reader = Reader::from_str(body);
    reader.config_mut().check_comments = true;
    let err_at = |reader: &Reader<&[u8]>, e: &dyn fmt::Display| {
        malformed(reader.error_position() + bom_len, e)
    };

    let mut tree = Tree::default();
    let root = loop {
        let event = reader.read_event().map_err(|e| err_at(&reader, &e))?;
        let empty = matches!(event, Event::Empty(_));
        match event {
            Event::Start(e) | Event::Empty(e) => {
                check_attributes(&e).map_err(|m| err_at(&reader, &m))?;
                let name = e.local_name().into_inner().to_string();
                if tree.depth > 0 && empty {
                    tree.empty(name);
                } else if tree.depth > 0 {
                    tree.open(name);
                } else if empty {
                    break root_node(name)?;
                } else {
                    tree.stack.push(root_node(name)?);
                    tree.depth = 1;
                }
            }
            Event::End(_) => {
                if let Some(root) = tree.close().map_err(|m| err_at(&reader, &m))? {
                    break root;
                }
            }
            Event::Text(t) => {
                let t = t.xml10_content();
                tree.text(&t, !t.trim().is_empty());
            }
            Event::CData(t) => tree.text(&t.xml10_content(), true),
            Event::GeneralRef(r) => {
                let c = if r.is_char_ref() {
                    match r.resolve_char_ref() {
                        Ok(Some(c)) if is_xml_char(c) => c,
                        _ => {
                            return Err(err_at(
                                &reader,
                                &format_args!("invalid character reference &{};", &*r),
                            ));
                        }
                    }
                } else {
                    resolve_entity(&r).ok_or_else(|| {
                        err_at(
                            &reader,
                            &format_args!(
                                "unknown entity &{};; only &lt; &gt; &amp; &apos; &quot; and character references are defined",
                                &*r
                            ),
                        )
                    })?
                };
                tree.text(c.encode_utf8(&mut [0; 4]), true);
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            Event::Eof => {
                return Err(match tree.stack.last() {
                    None => ParseError::NoRoot,
                    Some(open) => malformed(
                        body.len() as u64 + bom_len,
                        format!(
                            "document ends before <{}> is closed; add the missing end tag",
                            open.name
                        ),
                    ),
                });
            }
        }
    };

    // Go's decoder never looks past the root's end tag; note anything there.
    let mut content_outside_root = tree.content_outside_root;
    loop {
        match reader.read_event() {
            Ok(Event::Eof) => break,
            Ok(Event::Text(t)) if t.xml10_content().trim().is_empty() => {}
            Ok(Event::Comment(_) | Event::PI(_)) => {}
            Ok(_) | Err(_) => {
                content_outside_root = true;
                break;
            }
        }
    }
    Ok(Document {
        root,
        content_outside_root,
    })
}

/// The element tree while it is read: the stored open elements, and how
/// deep the reader is (every open element counts, stored or not: elements
/// below [`MAX_STORED_DEPTH`] are read and checked but not kept).
#[derive(Default)]
struct Tree {
    stack: Vec<Node>,
    depth: usize,
    /// Character data before the root's start tag.
    content_outside_root: bool,
}

impl Tree {
    fn open(&mut self, name: String) {
        self.depth += 1;
        if self.depth <= MAX_STORED_DEPTH {
            self.stack.push(Node {
                name,
                ..Node::default()
            });
        }
    }

    /// `<name/>` inside the root.
    fn empty(&mut self, name: String) {
        if self.depth < MAX_STORED_DEPTH
            && let Some(parent) = self.stack.last_mut()
        {
            parent.children.push(Node {
                name,
                ..Node::default()
            });
        }
    }

    /// Closes the innermost element; the root, when that was it.
    fn close(&mut self) -> Result<Option<Node>, &'static str> {
        if self.depth == 0 {
            return Err("end tag without a start tag");
        }
        let mut closed_root = None;
        if self.depth <= MAX_STORED_DEPTH {
            let node = self.stack.pop().ok_or("unbalanced tags")?;
            match self.stack.last_mut() {
                Some(parent) => parent.children.push(node),
                None => closed_root = Some(node),
            }
        }
        self.depth -= 1;
        Ok(closed_root)
    }

    /// Character data: the innermost stored element's text, or, before the
    /// root, noted when `significant` (not white space).
    fn text(&mut self, text: &str, significant: bool) {
        if self.depth == 0 {
            self.content_outside_root |= significant;
        } else if self.depth <= MAX_STORED_DEPTH
            && let Some(node) = self.stack.last_mut()
        {
            node.text.push_str(text);
        }
    }
}

fn root_node(name: String) -> Result<Node, ParseError> {
    if name != ROOT_ELEMENT {
        return Err(ParseError::WrongRoot { found: name });
    }
    Ok(Node {
        name,
        ..Node::default()
    })
}

/// Attribute syntax is checked (quoting, duplicates) because Go's decoder
/// rejects malformed attributes even though no attribute is used.
fn check_attributes(e: &quick_xml::events::BytesStart<'_>) -> Result<(), String> {
    for attr in e.attributes() {
        attr.map_err(|err| err.to_string())?;
    }
    Ok(())
}
