// ESLint (flat config): typescript-eslint's recommended rules, the React hooks rules, and the console's
// layering as a rule: app → features → shared, and no feature imports another feature.
import { readdirSync } from "node:fs";
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import importX from "eslint-plugin-import-x";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

// Every folder under src/features is a feature, so a new one is fenced in without editing this file.
const features = readdirSync(new URL("./src/features", import.meta.url), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);

const layering = [
  ...features.map((name) => ({
    target: `./src/features/${name}`,
    from: "./src/features",
    except: [`./${name}`],
    message: "Features do not import each other: compose them in src/app (a route), or move what both need to src/shared.",
  })),
  {
    target: "./src/features",
    from: "./src/app",
    message: "Features do not import the app; the app composes features.",
  },
  {
    target: "./src/shared",
    from: ["./src/features", "./src/app"],
    message: "src/shared is imported by features and the app, never the other way round.",
  },
];

export default defineConfig(
  { ignores: ["dist/", "node_modules/", "src/shared/api/schema.d.ts"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  reactHooks.configs.flat.recommended,
  {
    files: ["src/**/*.{ts,tsx}"],
    languageOptions: { globals: globals.browser },
    plugins: { "import-x": importX },
    settings: {
      "import-x/resolver-next": [createTypeScriptImportResolver({ project: "./tsconfig.json" })],
    },
    rules: {
      "import-x/no-restricted-paths": ["error", { zones: layering }],
      // no-restricted-paths can only judge an import it can resolve; an unresolved one must not slip by.
      "import-x/no-unresolved": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    files: ["*.{js,ts}", "scripts/**/*.{js,mjs}"],
    languageOptions: { globals: globals.node },
  },
);
