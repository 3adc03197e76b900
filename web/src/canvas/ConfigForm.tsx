// A node's config edited in a form generated from its type's JSON schema: text, number, integer, boolean and enum
// fields, and JSON text for objects, arrays and anything else; each field with the schema's description as help.
import { useState } from "react";
import type { JsonSchema } from "./types";

type Kind = "string" | "number" | "integer" | "boolean" | "enum" | "json";
type Field = { kind: Kind; schema: JsonSchema; nullable: boolean; options: unknown[] };

function resolve(schema: JsonSchema, root: JsonSchema): JsonSchema {
  const ref = schema.$ref;
  if (!ref || !ref.startsWith("#/$defs/")) return schema;
  const target = root.$defs?.[ref.slice("#/$defs/".length)];
  const rest = { ...schema };
  delete rest.$ref;
  return target ? { ...resolve(target, root), ...rest } : rest;
}

/** How a property is edited: its kind after `$ref`s and a nullable `anyOf` are taken apart. */
function fieldOf(raw: JsonSchema, root: JsonSchema): Field {
  let schema = resolve(raw, root);
  let nullable = false;
  const variants = schema.anyOf ?? schema.oneOf;
  if (variants) {
    const nonNull = variants.map((v) => resolve(v, root)).filter((v) => v.type !== "null");
    nullable = nonNull.length < variants.length;
    if (nonNull.length !== 1) return { kind: "json", schema, nullable, options: [] };
    const rest = { ...schema };
    delete rest.anyOf;
    delete rest.oneOf;
    schema = { ...nonNull[0], ...rest };
  }
  if (Array.isArray(schema.type)) {
    nullable = nullable || schema.type.includes("null");
    const types = schema.type.filter((t) => t !== "null");
    schema = { ...schema, type: types.length === 1 ? types[0] : undefined };
  }
  if (schema.enum) return { kind: "enum", schema, nullable, options: schema.enum };
  const kind: Kind =
    schema.type === "string" || schema.type === "number" || schema.type === "integer" || schema.type === "boolean"
      ? schema.type
      : "json";
  return { kind, schema, nullable, options: [] };
}

type FieldProps = {
  name: string;
  field: Field;
  required: boolean;
  value: unknown;
  onChange: (value: unknown) => void;
};

/** Under a field: the schema's description, its default, and what is wrong with the text typed (if anything). A
 * field's `onChange(undefined)` removes its key, so that the type's default applies. */
function Help({ field, error }: { field: Field; error: string | null }) {
  const { description, default: fallback } = field.schema;
  return (
    <>
      {description && <div className="help">{description}</div>}
      {fallback !== undefined && fallback !== null && (
        <div className="help muted">default: {JSON.stringify(fallback)}</div>
      )}
      {error && <div className="field-error">{error}</div>}
    </>
  );
}

function NumberField({ name, field, required, value, onChange }: FieldProps) {
  const [draft, setDraft] = useState(typeof value === "number" ? String(value) : "");
  const [error, setError] = useState<string | null>(null);
  const change = (text: string) => {
    setDraft(text);
    if (text.trim() === "") {
      setError(required ? "required" : null);
      onChange(field.nullable && required ? null : undefined);
      return;
    }
    const number = Number(text);
    if (!Number.isFinite(number)) return setError("not a number");
    if (field.kind === "integer" && !Number.isInteger(number)) return setError("not an integer");
    setError(null);
    onChange(number);
  };
  return (
    <>
      <input
        type="text"
        inputMode="decimal"
        value={draft}
        data-testid={`config-field-${name}`}
        onChange={(e) => change(e.target.value)}
      />
      <Help field={field} error={error} />
    </>
  );
}

function JsonField({ name, field, value, onChange }: FieldProps) {
  const [draft, setDraft] = useState(value === undefined ? "" : JSON.stringify(value, null, 2));
  const [error, setError] = useState<string | null>(null);
  const change = (text: string) => {
    setDraft(text);
    if (text.trim() === "") {
      setError(null);
      onChange(undefined);
      return;
    }
    try {
      onChange(JSON.parse(text));
      setError(null);
    } catch (e) {
      setError(`not JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  return (
    <>
      <textarea
        rows={Math.min(8, Math.max(2, draft.split("\n").length))}
        value={draft}
        spellCheck={false}
        data-testid={`config-field-${name}`}
        onChange={(e) => change(e.target.value)}
      />
      <Help field={field} error={error} />
    </>
  );
}

function ScalarField({ name, field, required, value, onChange }: FieldProps) {
  if (field.kind === "boolean") {
    const checked = typeof value === "boolean" ? value : field.schema.default === true;
    return (
      <>
        <input
          type="checkbox"
          checked={checked}
          data-testid={`config-field-${name}`}
          onChange={(e) => onChange(e.target.checked)}
        />
        <Help field={field} error={null} />
      </>
    );
  }
  if (field.kind === "enum") {
    const index = field.options.findIndex((option) => option === value);
    return (
      <>
        <select
          value={index < 0 ? "" : String(index)}
          data-testid={`config-field-${name}`}
          onChange={(e) => onChange(e.target.value === "" ? undefined : field.options[Number(e.target.value)])}
        >
          {(!required || index < 0) && <option value="">{required ? "(choose)" : "(default)"}</option>}
          {field.options.map((option, i) => (
            <option key={i} value={String(i)}>
              {String(option)}
            </option>
          ))}
        </select>
        <Help field={field} error={null} />
      </>
    );
  }
  const text = typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value);
  return (
    <>
      <input
        type="text"
        value={text}
        data-testid={`config-field-${name}`}
        onChange={(e) => {
          const next = e.target.value;
          onChange(next === "" && !required ? undefined : next);
        }}
      />
      <Help field={field} error={required && text === "" ? "required" : null} />
    </>
  );
}

function ConfigField(props: FieldProps) {
  const { kind } = props.field;
  const input =
    kind === "number" || kind === "integer" ? (
      <NumberField {...props} />
    ) : kind === "json" ? (
      <JsonField {...props} />
    ) : (
      <ScalarField {...props} />
    );
  return (
    <label className={`config-field kind-${kind}`}>
      <span className="field-name">
        {props.field.schema.title ?? props.name}
        {props.required && <span className="required">*</span>}
        <code>{props.name}</code>
      </span>
      {input}
    </label>
  );
}

type FormProps = {
  schema: JsonSchema | null | undefined;
  config: Record<string, unknown>;
  /** One key changed (`undefined`: removed, the type's default applies); the caller applies it to the config as it
   * is then, so two quick edits never undo each other. */
  onChange: (key: string, value: unknown) => void;
};

/** The form of one node's config; `schema` undefined is an unknown node type (its config as JSON text), null a
 * type that takes no config. */
export function ConfigForm({ schema, config, onChange }: FormProps) {
  const set = onChange;
  if (schema === null && Object.keys(config).length === 0) {
    return (
      <div className="config-form" data-testid="config-form">
        <p className="muted">This node type takes no config.</p>
      </div>
    );
  }
  const root: JsonSchema = schema ?? {};
  const properties = root.properties ?? {};
  const required = new Set(root.required ?? []);
  const extra = Object.keys(config).filter((key) => !(key in properties));
  const generic: Field = {
    kind: "json",
    schema: { description: "not in the type's config schema" },
    nullable: false,
    options: [],
  };
  return (
    <div className="config-form" data-testid="config-form">
      {Object.entries(properties).map(([key, property]) => (
        <ConfigField
          key={key}
          name={key}
          field={fieldOf(property, root)}
          required={required.has(key)}
          value={config[key]}
          onChange={(value) => set(key, value)}
        />
      ))}
      {extra.map((key) => (
        <ConfigField
          key={key}
          name={key}
          field={schema === undefined ? { ...generic, schema: {} } : generic}
          required={false}
          value={config[key]}
          onChange={(value) => set(key, value)}
        />
      ))}
    </div>
  );
}
