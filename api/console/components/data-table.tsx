import type { ComponentChildren } from 'preact';
import '../styles/stacked-table.css';

/** A column of a DataTable: its header, and how a row fills its cell. */
export interface Column<T> {
  /** The header; on a phone, the label each stacked cell carries. */
  label: string;
  /** A header for screen readers only, and a cell with no label on a phone (a row's actions). */
  labelHidden?: boolean;
  cell: (row: T) => ComponentChildren;
  class?: string;
  /** Attributes of the cell beyond its class (e.g. `data-size` for tests and styles). */
  attrs?: (row: T) => Record<string, string | number | null>;
}

export interface DataTableProps<T> {
  /** Said to screen readers before the table ("API keys, oldest first"). */
  caption: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string | number;
  /** Attributes of each row (e.g. `data-run-id`). */
  rowAttrs?: (row: T) => Record<string, string>;
  class?: string;
  /**
   * `stack` (default): at phone width each row becomes a card, each cell under its column's
   * name (stacked-table.css). `scroll`: the table keeps its columns and scrolls sideways in a
   * box the keyboard can focus, named by `scrollLabel`.
   */
  phone?: 'stack' | 'scroll';
  scrollLabel?: string;
}

/**
 * Every table of the console: a caption for screen readers, column headers with their scope,
 * the first cell of a row as the row's header, and one of two phone layouts.
 */
export function DataTable<T>({ caption, columns, rows, rowKey, rowAttrs, class: cls, phone = 'stack', scrollLabel }: DataTableProps<T>) {
  const stacked = phone === 'stack';
  const label = (c: Column<T>) => (stacked && !c.labelHidden ? c.label : undefined);
  const table = (
    <table class={[cls, stacked ? 'stacked-table' : ''].filter(Boolean).join(' ')}>
      <caption class="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          {columns.map((c) => (
            <th key={c.label} scope="col">
              {c.labelHidden ? <span class="visually-hidden">{c.label}</span> : c.label}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={rowKey(row)} {...rowAttrs?.(row)}>
            {columns.map((c, i) => {
              const props = { class: c.class, 'data-label': label(c), ...c.attrs?.(row) };
              return i === 0 ? (
                <th key={c.label} scope="row" {...props}>
                  {c.cell(row)}
                </th>
              ) : (
                <td key={c.label} {...props}>
                  {c.cell(row)}
                </td>
              );
            })}
          </tr>
        ))}
      </tbody>
    </table>
  );
  return stacked ? (
    <div class="table-scroll">{table}</div>
  ) : (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={scrollLabel ?? caption}>
      {table}
    </div>
  );
}
