import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import "@/shared/i18n/i18n";
import "./app/styles.css";
import { App } from "./app/App";

createRoot(document.getElementById("root") as HTMLElement).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
