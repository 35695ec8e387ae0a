//! `skills/`: flat `<name>.md` files and packaged `<name>/SKILL.md` folders.

use serde::Deserialize;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::Skill;
use crate::names;
use crate::source::Ctx;
use crate::walk::{self, Entry};

#[derive(Debug, Default, Deserialize)]
struct SkillFrontmatter {
    name: Option<String>,
    description: Option<String>,
}

/// A flat skill: optional `description` frontmatter, else the first line
/// of the body.
pub(crate) fn read_flat_skill(ctx: &mut Ctx, entry: &Entry) -> Option<Skill> {
    let name = entry.stem().to_owned();
    let src = ctx.read_text(&entry.path)?;
    let (fm, body): (SkillFrontmatter, String) = ctx.parse_markdown(&src)?;
    let _ = fm.name;
    let description = fm
        .description
        .filter(|d| !d.trim().is_empty())
        .or_else(|| first_body_line(&body));
    let Some(description) = description else {
        ctx.push(
            Diagnostic::error(
                Code::MissingDescription,
                src.rel.clone(),
                format!("skill `{name}` is empty: it has no description and no text"),
            )
            .with_hint("add `description:` frontmatter saying when to use the skill"),
        );
        return None;
    };
    Some(Skill {
        name,
        path: src.rel.clone(),
        description,
        packaged: false,
        body,
        files: Vec::new(),
        dir: None,
    })
}

/// A packaged skill: `SKILL.md` with required `description`, plus files.
pub(crate) fn read_packaged_skill(ctx: &mut Ctx, entry: &Entry) -> Option<Skill> {
    let name = entry.name.clone();
    let skill_md = entry.path.join("SKILL.md");
    if !skill_md.is_file() {
        let d = Diagnostic::error(Code::MissingFile, ctx.rel(&entry.path), format!("skill folder `{name}` has no `SKILL.md`"))
            .with_hint("a packaged skill is `skills/<name>/SKILL.md` with `description` frontmatter; a single file can be `skills/<name>.md`");
        ctx.push(d);
        return None;
    }
    let src = ctx.read_text(&skill_md)?;
    let (fm, body): (SkillFrontmatter, String) = ctx.parse_markdown(&src)?;
    let Some(description) = fm.description.filter(|d| !d.trim().is_empty()) else {
        ctx.push(
            Diagnostic::error(
                Code::MissingDescription,
                src.rel.clone(),
                format!("packaged skill `{name}` needs `description` frontmatter"),
            )
            .at(Some(crate::diagnostic::Position { line: 1, column: 1 }))
            .with_hint("start SKILL.md with frontmatter: a `---` line, `description: Use when …`, then a closing `---` line"),
        );
        return None;
    };
    let files = walk::walk_files(ctx, &entry.path)
        .into_iter()
        .map(|(rel, _)| rel)
        .filter(|rel| rel != "SKILL.md")
        .collect();
    Some(Skill {
        name,
        path: src.rel.clone(),
        description,
        packaged: true,
        body,
        files,
        dir: Some(entry.path.clone()),
    })
}

fn first_body_line(body: &str) -> Option<String> {
    body.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

/// Reads `skills/`.
pub(crate) fn read_skills(ctx: &mut Ctx, dir: &std::path::Path) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    for e in walk::list_dir(ctx, dir) {
        let name = if e.is_dir { e.name.as_str() } else { e.stem() };
        let skill = if e.is_dir {
            if !check_name(ctx, &e, name) {
                continue;
            }
            read_packaged_skill(ctx, &e)
        } else if e.ext() == Some("md") {
            if !check_name(ctx, &e, name) {
                continue;
            }
            read_flat_skill(ctx, &e)
        } else if walk::is_script_source(&e.name) {
            let stem = walk::definition_stem(&e.name);
            let replaced = dir.join(format!("{stem}.md")).is_file() || dir.join(stem).is_dir();
            let d = walk::script_definition(
                ctx,
                &e.path,
                replaced,
                format!(
                    "`{}` is a TypeScript/JavaScript skill, which this host cannot load",
                    e.name
                ),
                format!(
                    "write `skills/{stem}.md` (or `skills/{stem}/SKILL.md`) with `description` frontmatter"
                ),
            );
            ctx.push(d);
            None
        } else {
            let d = Diagnostic::warning(
                Code::UnknownEntry,
                ctx.rel(&e.path),
                format!(
                    "`{}` is not a skill; skills are `<name>.md` files or `<name>/SKILL.md` folders",
                    e.name
                ),
            );
            ctx.push(d);
            None
        };
        if let Some(skill) = skill {
            if let Some(prev) = skills.iter().find(|s| s.name == skill.name) {
                let d = Diagnostic::error(
                    Code::DuplicateName,
                    skill.path.clone(),
                    format!("skill `{}` is also defined by `{}`", skill.name, prev.path),
                );
                ctx.push(d);
                continue;
            }
            skills.push(skill);
        }
    }
    skills
}

fn check_name(ctx: &mut Ctx, e: &Entry, name: &str) -> bool {
    if names::is_valid_slug(name) {
        return true;
    }
    let d = Diagnostic::error(
        Code::InvalidName,
        ctx.rel(&e.path),
        format!("`{name}` is not a valid skill name"),
    )
    .with_hint("names use letters, digits, `-` and `_`, starting with a letter or digit");
    ctx.push(d);
    false
}
