// The package ships no types; the test reads the families it returns field by field.
declare module "parse-prometheus-text-format" {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
