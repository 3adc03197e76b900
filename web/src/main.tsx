import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { takeTokenFromAddress } from "./api";
import { App } from "./App";
import "./styles.css";

takeTokenFromAddress();
createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
