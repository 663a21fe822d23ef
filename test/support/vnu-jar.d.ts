// vnu-jar ships the Nu Html Checker (the W3C's validator) with no types: its main module is the jar's path.
declare module "vnu-jar" {
  const jarPath: string;
  export default jarPath;
}
